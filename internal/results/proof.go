package results

import (
	"maps"
	"slices"
	"strings"
)

// The knobs' proofs, as the file records them: a lab knob's (KnobProof),
// produced by internal/measure/knob's Appliers in this type, the packets
// (internal/measure/pktstat's Packets) and the policy knobs' (PolicyProof).

// KnobProof is what one lab knob's proof found at one place (Cell.Proofs):
// a link, a pod's device, a pod's namespace.
type KnobProof struct {
	Knob string `json:"knob"`
	// Wanted is the value asked ("": none, what the mode built).
	Wanted string `json:"wanted,omitempty"`
	Got    string `json:"got"`
	// Where is the place: "eth0 (veth) in vnl-lab-pod-a".
	Where string `json:"where"`
	// NotApplied is why Got is not Wanted there ("": it is, or nothing
	// was asked).
	NotApplied string `json:"not_applied,omitempty"`
}

// FeatureStates spells a link's offload states (by ethtool's short name:
// "on", "off", "mixed", with " (fixed)") as the offload knob's proof's
// Got: "gro:on+gso:on+rx:on (fixed)", by name.
func FeatureStates(states map[string]string) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, n+":"+states[n])
	}
	return strings.Join(parts, "+")
}

// ParseFeatureStates reads FeatureStates back.
func ParseFeatureStates(got string) map[string]string {
	out := map[string]string{}
	for _, item := range strings.Split(got, "+") {
		if n, st, ok := strings.Cut(item, ":"); ok {
			out[n] = st
		}
	}
	return out
}

// PacketSide is what one device carried in a cell's proof sample.
type PacketSide struct {
	NS       string `json:"ns"`
	Link     string `json:"link"`
	Packets  uint64 `json:"packets"`
	Segments uint64 `json:"segments"` // each GSO/GRO packet counts its gso_segs
	// AvgBytes is the average packet as the device handled it (a GSO
	// packet whole at transmit; after GRO at receive), AvgSegment the
	// average on the wire (bytes over segments), MaxBytes the largest.
	AvgBytes   float64 `json:"avg_bytes"`
	AvgSegment float64 `json:"avg_segment_bytes"`
	MaxBytes   uint64  `json:"max_bytes"`
}

// Packets are the packets at the two ends of a cell's path (Cell.Packets):
// the sender's busiest transmitting device in the client's namespace and
// the receiver's busiest receiving device in the server's (after GRO).
type Packets struct {
	Sender   *PacketSide `json:"sender_tx,omitempty"`
	Receiver *PacketSide `json:"receiver_rx,omitempty"`
	// Note says what the averages mix, or why the receiver is absent:
	// PacketsSameNS, PacketsUnseen.
	Note string `json:"note,omitempty"`
}

// Packets.Note's words.
const (
	// PacketsSameNS: client and server share a namespace (host mode).
	PacketsSameNS = "client and server in one namespace: its loopback carries both directions, so the averages include the acknowledgements"
	// PacketsUnseen: the server's namespace received far less than the
	// client's sent, so the receiver's average is not given.
	PacketsUnseen = "the server's device received without netif_receive_skb in its namespace (bpf_redirect_peer, a macvlan's receive handler): no post-GRO count"
)

// PolicyProof is what a cell's NetworkPolicies were and the proof that
// they were in force (Cell.Policies), taken around the cell's
// proof sample, outside its measured windows.
type PolicyProof struct {
	// Policies and IPBlocks: the generated set (besides the policy that
	// allows the measured flow); LoadSec: how long the provider took to
	// load it (the whole transaction: check, compile, load).
	Policies int     `json:"policies"`
	IPBlocks int     `json:"ipblocks,omitempty"`
	LoadSec  float64 `json:"load_s"`
	// Objects: the provider's rules, set elements or map entries read
	// back from the lab; Want: what the compiled policies make.
	Objects int `json:"objects"`
	Want    int `json:"want"`
	// Probe is the flow the policies deny, probed, and what became of it;
	// ProbeDenied the provider's denied count over the probe.
	Probe       string `json:"probe,omitempty"`
	ProbeDenied uint64 `json:"probe_denied"`
	// Evaluated: the provider's count of packets decided by policy over
	// the proof sample (new connections; established ones pass first).
	Evaluated uint64 `json:"evaluated"`
	// NotApplied is why the set is not proven in force ("": it is).
	NotApplied string `json:"not_applied,omitempty"`
}
