package readiness

import (
	"os"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/testnet"
)

// The tests let a loopback port go and bind it again: in a namespace of
// their own, nothing else can take it in between.
func TestMain(m *testing.M) { os.Exit(testnet.OwnNetns(m)) }
