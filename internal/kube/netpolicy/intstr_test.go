package netpolicy

import (
	"strconv"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// intstrOf is a port given as a number or a name.
func intstrOf(s string) intstr.IntOrString {
	if n, err := strconv.Atoi(s); err == nil {
		return intstr.FromInt32(int32(n))
	}
	return intstr.FromString(s)
}
