package results

// The knobs' settings and their proof, as the file records
// them; the runner converts internal/measure/knob's and internal/measure/pktstat's types
// into these (runner/filing.go).

// Links are the knobs a lab's links take (Settings.Links, LinkProof.Requested):
// zero values leave the mode's own settings alone.
type Links struct {
	MTU     int    `json:"mtu,omitempty"`
	GSO     int    `json:"gso_max_size,omitempty"`
	GRO     int    `json:"gro_max_size,omitempty"`
	Offload string `json:"offload,omitempty"`
}

// IsZero says no knob is set.
func (l Links) IsZero() bool { return l == Links{} }

// LinkState is one link as the kernel reported it after the knobs were set.
type LinkState struct {
	NS             string `json:"ns"`
	Name           string `json:"name"`
	Kind           string `json:"kind"`
	MTU            int    `json:"mtu"`
	GSOMaxSize     uint32 `json:"gso_max_size"`
	GROMaxSize     uint32 `json:"gro_max_size"`
	GSOIPv4MaxSize uint32 `json:"gso_ipv4_max_size,omitempty"`
	GROIPv4MaxSize uint32 `json:"gro_ipv4_max_size,omitempty"`
	TSOMaxSize     uint32 `json:"tso_max_size,omitempty"`
	// Features: each offload's state by short name ("on", "off",
	// "mixed"), with " (fixed)" when the device cannot change it.
	Features map[string]string `json:"features,omitempty"`
}

// LinkProof is what a lab's links were asked and what the kernel kept (Cell.Links).
type LinkProof struct {
	Requested Links       `json:"requested,omitempty"`
	Links     []LinkState `json:"links"`
	// NotApplied is why a requested setting is not in force on some
	// link: the kernel's refusal, or what it kept instead ("": all in force).
	NotApplied string `json:"not_applied,omitempty"`
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
