package bench

import (
	"strconv"
	"strings"
	"testing"
)

// N Services that would not fit the available memory are refused before
// anything is made, with the estimate and the largest N that fits; N
// that fits passes.
func TestCheckFits(t *testing.T) {
	var avail int64 = 24 << 30
	if err := checkFits(100000, 1, avail); err != nil {
		t.Errorf("100k Services of 1 endpoint in 24 GB: %v", err)
	}
	err := checkFits(10000000, 10, avail)
	if err == nil {
		t.Fatal("10M Services of 10 endpoints in 24 GB: accepted")
	}
	fits := int64(float64(avail)*memoryShare) / estimateAPIBytes(1, 10)
	for _, want := range []string{"--extra-services 10000000", "GB more", "use at most " + strconv.FormatInt(fits, 10)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if checkFits(int(fits), 10, avail) != nil || checkFits(int(fits)+1, 10, avail) == nil {
		t.Errorf("the largest N said (%d) does not fit, or the next one does", fits)
	}
}
