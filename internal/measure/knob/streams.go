package knob

// Streams is the parallel streams (iperf3 -P); concurrent flows for rr/crr.
const Streams Name = "streams"

// MaxStreams bounds Streams.
const MaxStreams = 128

func init() {
	register(Knob{Name: Streams, Scope: Engine, order: 20, Whole: true, Example: "2", canonical: intIn(Streams, 1, MaxStreams, ""),
		Help:     "parallel streams (iperf3 -P), or concurrent flows of rr/crr tests",
		intField: func(s *Settings) *int { return &s.Streams },
		// Streams 0 (a spec's zero value) is one stream, as the engines read it.
		check: countMax(Streams, MaxStreams, "", "")})
}
