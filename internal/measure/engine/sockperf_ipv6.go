package engine

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// sockperf over IPv6: sockperf parses addresses as IPv6 from 3.8 on; 3.7
// (Debian 12's) refuses "-i ::1" ("Invalid address"), so an IPv6 cell with
// --engine sockperf is refused before any lab is built, naming the engine
// that runs the same test over IPv6.

// sockperfIPv6Since is the first sockperf whose -i takes an IPv6 address.
var sockperfIPv6Since = [2]int{3, 8}

var sockperfVersionRE = regexp.MustCompile(`version (\d+)\.(\d+)`)

var (
	sockperfVerOnce sync.Once
	sockperfVer     [2]int
)

// sockperfIPv6 says why the installed sockperf cannot measure over IPv6.
func sockperfIPv6() error {
	sockperfVerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, "sockperf", "--version").CombinedOutput()
		sockperfVer = parseSockperfVersion(string(out))
	})
	return sockperfIPv6Check(sockperfVer)
}

func parseSockperfVersion(out string) [2]int {
	m := sockperfVersionRE.FindStringSubmatch(out)
	if m == nil {
		return [2]int{}
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return [2]int{a, b}
}

func sockperfIPv6Check(v [2]int) error {
	if v[0] > sockperfIPv6Since[0] || (v[0] == sockperfIPv6Since[0] && v[1] >= sockperfIPv6Since[1]) {
		return nil
	}
	return field.Errorf("engine", "sockperf %d.%d takes IPv4 addresses only (IPv6 from %d.%d): drop {engine} sockperf for IPv6 (the rr engine runs tcp_rr and udp_rr over both families)",
		v[0], v[1], sockperfIPv6Since[0], sockperfIPv6Since[1])
}

// sockperfAny is the server's wildcard address of the target's family.
func sockperfAny(tg Target) string {
	if tg.IPv6() {
		return "::"
	}
	return "0.0.0.0"
}
