package testnet

import (
	"os"
	"strconv"
)

// EnvInt is the positive integer in environment variable k, else def (the
// opt-in benchmarks' knobs: VNETLAB_BENCH_SECS, VNETLAB_BENCH_ROUNDS, ...).
func EnvInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
