package knob

// Load is the streams saturating the path while an rr/crr test runs.
const Load Name = "load"

// MaxLoad bounds Load.
const MaxLoad = 64

func init() {
	register(Knob{Name: Load, Scope: Engine, order: 70, Whole: true, Example: "2", Unit: "streams", RequestResponseOnly: true,
		canonical: intIn(Load, 0, MaxLoad, ""),
		Help:      "streams saturating the path while rr/crr tests run (latency under load; 0: idle)",
		intField:  func(s *Settings) *int { return &s.Load }})
}
