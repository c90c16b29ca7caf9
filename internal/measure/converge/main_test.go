package converge

import (
	"os"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/testnet"
)

// The tests let a loopback port go and bind it again, and probe ports
// they chose: in a namespace of their own, nothing else can take them.
func TestMain(m *testing.M) { os.Exit(testnet.OwnNetns(m)) }
