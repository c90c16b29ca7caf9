package testnet

import (
	"flag"
	"fmt"
	"time"
)

// CheckTimeout refuses a go test -timeout shorter than least, for a
// package whose TestMain brings up something only its own teardown
// removes: go test's timeout panics from a goroutine of its own, TestMain's
// teardown never runs, and the machine keeps a local cluster. why says
// what takes the time. It parses the flags if TestMain has not.
func CheckTimeout(least time.Duration, why string) error {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.timeout")
	if f == nil {
		return nil
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return nil
	}
	d, _ := g.Get().(time.Duration)
	if d == 0 || d >= least {
		return nil
	}
	return fmt.Errorf("-timeout %s is too short for this package (%s): go test's timeout would kill it before its teardown, leaving up what it brought up; run go test -timeout %s or more (make test does)", d, why, least)
}
