package knob

// Size is the rr/crr request and response bytes; a stream's write size (iperf3 -l).
const Size Name = "size"

// MaxSize is rr's largest message; UDP tests are held to 65507 by their engines.
const MaxSize = 1 << 20

func init() {
	register(Knob{Name: Size, Scope: Engine, order: 10, Whole: true, Example: "64", Unit: "B", canonical: intIn(Size, 1, MaxSize, ""),
		Help:     "bytes per request and response (rr, crr; sockperf needs 14 or more), per write (iperf3 -l), per datagram (udp_pps: default 64); 0: each engine's default",
		intField: func(s *Settings) *int { return &s.Size },
		check:    countMax(Size, MaxSize, " bytes", " (0: each engine's default)")})
}
