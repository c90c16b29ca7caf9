package runner

import (
	"context"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/results"
)

// windowed reports its measured window as a real driver does.
type windowed struct{}

func (windowed) Name() string              { return "st-windowed" }
func (windowed) Supports(engine.Test) bool { return true }
func (windowed) Run(ctx context.Context, _ engine.Target, _ engine.Spec) (engine.Result, error) {
	engine.MeasureStart(ctx)
	time.Sleep(20 * time.Millisecond)
	engine.MeasureEnd(ctx)
	return engine.Result{Value: 1, Bytes: 1e9}, nil
}

// stepMeter's counters grow by a fixed step per node at each reading: node
// "a" 1 s user and 2 s system, "b" 3 s softirq; machines by node.
type stepMeter struct {
	n        uint64
	machines map[string]string
}

func (m *stepMeter) Take(context.Context) (map[string]cpu.Snapshot, error) {
	m.n++
	hz := uint64(cpu.UserHZ())
	return map[string]cpu.Snapshot{
		"a": {At: time.Now(), User: m.n * hz, System: 2 * m.n * hz},
		"b": {At: time.Now(), SoftIRQ: 3 * m.n * hz},
	}, nil
}

func (m *stepMeter) Machine(node string) string { return m.machines[node] }

// Each node's delta over the driver's window lands in the sample; the
// sample's own CPU is this machine's when the nodes are here, else their
// sum with each machine counted once.
func TestMeasureNodeCPU(t *testing.T) {
	for _, tc := range []struct {
		name     string
		machines map[string]string
		cpu      float64 // want the sample's busy CPU (-1: this machine's)
	}{
		{"local nodes", nil, -1},
		{"two machines", map[string]string{"a": "m1", "b": "m2"}, 6},
		{"one machine behind both nodes", map[string]string{"a": "m1", "b": "m1"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &stepMeter{machines: tc.machines}
			p := Planned{Cell: &results.Cell{ClientNode: "a", ServerNode: "b"}, Driver: windowed{}}
			_, usage, nodes, _, err := measure(context.Background(), p, engine.Spec{}, nil, m, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, b := nodes["a"], nodes["b"]
			if a == nil || b == nil || a.UserSec != 1 || a.SystemSec != 2 || b.SoftirqSec != 3 || a.Window != "client" {
				t.Fatalf("node CPU %+v %+v, want a 1 s user + 2 s system, b 3 s softirq over the client window", a, b)
			}
			if usage == nil {
				t.Fatal("no sample CPU")
			}
			if tc.cpu < 0 {
				if usage.BusySec() >= 6 || usage.WallSec <= 0 || usage.WallSec > 5 {
					t.Fatalf("local nodes: sample CPU %+v is not this machine's own /proc/stat", usage)
				}
				return
			}
			if usage.BusySec() != tc.cpu {
				t.Fatalf("sample CPU %g s, want %g", usage.BusySec(), tc.cpu)
			}
		})
	}
}
