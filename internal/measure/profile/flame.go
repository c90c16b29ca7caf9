package profile

import (
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// A flame graph as plain SVG: one rectangle per frame, width by samples,
// colour by stage, and a <title> on each that browsers show on hover (name,
// samples, share, µs per unit): no script is needed to read it, and it
// renders offline, inline in HTML.

// FlameOptions shape a flame graph.
type FlameOptions struct {
	Title string
	// USPerSample turns samples into µs per unit of work (0: samples only).
	USPerSample float64
	Unit        string // "transaction", "MB"
	Width       int    // pixels; 0: 1200
	// Base, when set, makes a differential flame graph: the shape is this
	// profile's, the colour the relative change of each frame's inclusive
	// µs per unit against Base (red: more than Base, blue: less).
	Base            *Profile
	BaseUSPerSample float64
	BaseTitle       string
}

type flameNode struct {
	name     string
	value    uint64 // inclusive samples
	children map[string]*flameNode
}

func (n *flameNode) child(name string) *flameNode {
	if n.children == nil {
		n.children = map[string]*flameNode{}
	}
	c, ok := n.children[name]
	if !ok {
		c = &flameNode{name: name}
		n.children[name] = c
	}
	return c
}

func (n *flameNode) sorted() []*flameNode {
	out := make([]*flameNode, 0, len(n.children))
	for _, c := range n.children {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// dataPathTree is the tree of the data path's stacks (idle and other
// processes left out: the graph shows what the test cost).
func dataPathTree(p *Profile, r *Rules) *flameNode {
	root := &flameNode{name: "all"}
	for _, st := range p.Stacks {
		if k := r.Kind(r.Attribute(st)); !Counted(k) {
			continue
		}
		root.value += st.Count
		n := root
		for _, f := range FunctionFrames(st) {
			n = n.child(f)
			n.value += st.Count
		}
	}
	return root
}

const (
	flameFrameH = 16
	flameTop    = 28
)

// WriteFlameGraph writes p's data-path stacks as an SVG flame graph.
func WriteFlameGraph(w io.Writer, p *Profile, r *Rules, o FlameOptions) error {
	if o.Width <= 0 {
		o.Width = 1200
	}
	root := dataPathTree(p, r)
	var base *flameNode
	if o.Base != nil {
		base = dataPathTree(o.Base, r)
	}
	depth := treeDepth(root)
	height := flameTop + (depth+1)*flameFrameH + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="11">`+"\n",
		o.Width, height, o.Width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fdfdf6"/>`+"\n")
	title := o.Title
	if title == "" {
		title = "data-path CPU samples"
	}
	fmt.Fprintf(&b, `<text x="%d" y="18" text-anchor="middle" font-size="14">%s</text>`+"\n", o.Width/2, html.EscapeString(title))
	if root.value == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">no data-path samples</text>`+"\n", o.Width/2, flameTop+20)
	} else {
		scale := float64(o.Width-20) / float64(root.value)
		fl := flame{b: &b, r: r, o: o, total: root.value, scale: scale, height: height}
		fl.node(root, base, []string{}, 10, 0)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func treeDepth(n *flameNode) int {
	d := 0
	for _, c := range n.children {
		d = max(d, treeDepth(c)+1)
	}
	return d
}

type flame struct {
	b      *strings.Builder
	r      *Rules
	o      FlameOptions
	total  uint64
	scale  float64
	height int
}

// node draws n at x (pixels) and depth d (0 = the bottom row), then its
// children; base is the same path in the base profile (nil if absent).
func (f *flame) node(n, base *flameNode, path []string, x float64, d int) {
	w := float64(n.value) * f.scale
	if w < 0.3 {
		return
	}
	y := f.height - 8 - (d+1)*flameFrameH
	info := fmt.Sprintf("%s: %d samples, %.1f%%", n.name, n.value, 100*float64(n.value)/float64(f.total))
	if f.o.USPerSample > 0 {
		info += fmt.Sprintf(", %.2f µs/%s", float64(n.value)*f.o.USPerSample, f.o.Unit)
	}
	fill := f.stageColor(n.name)
	if f.o.Base != nil {
		var baseUS float64
		if base != nil {
			baseUS = float64(base.value) * f.o.BaseUSPerSample
		}
		us := float64(n.value) * f.o.USPerSample
		delta := us - baseUS
		fill = diffColor(delta, max(us, baseUS))
		info += fmt.Sprintf("; %s %.2f µs/%s (%+.2f)", f.o.BaseTitle, baseUS, f.o.Unit, delta)
	} else if st := f.r.match(n.name); st >= 0 {
		info += " [" + f.r.Stages[st].Name + "]"
	}
	fmt.Fprintf(f.b, `<g><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" rx="2"/>`,
		html.EscapeString(info), x, y, w, flameFrameH-1, fill)
	if chars := int((w - 4) / 6.7); chars >= 3 {
		label := n.name
		if len(label) > chars {
			label = label[:chars-2] + ".."
		}
		fmt.Fprintf(f.b, `<text x="%.1f" y="%d">%s</text>`, x+2, y+flameFrameH-4, html.EscapeString(label))
	}
	f.b.WriteString("</g>\n")
	cx := x
	for _, c := range n.sorted() {
		var bc *flameNode
		if base != nil && base.children != nil {
			bc = base.children[c.name]
		}
		f.node(c, bc, append(path, c.name), cx, d+1)
		cx += float64(c.value) * f.scale
	}
}

// stageColors: one hue per stage, so the graph reads like the stage bar.
var stageColors = map[string]string{
	"syscall": "#e8a33d", "tcp_udp": "#d9534f", "ip": "#f0ad4e", "routing": "#c9302c",
	"conntrack": "#5bc0de", "nat": "#31b0d5", "tables": "#2a7ab0", "br_netfilter": "#6f5499",
	"bridge": "#9b59b6", "veth": "#5cb85c", "netdev": "#8bc34a", "macvlan": "#16a085",
	"tc_bpf": "#e67e22", "tun": "#795548", "ovs": "#607d8b", "vxlan": "#00897b",
	"napi": "#cddc39", "softirq": "#d4c25a", "sched": "#b0b0b0", "profiler": "#dddddd",
	"engine": "#f7c873", "idle": "#eeeeee", StageKernelOther: "#e0c9a6", StageOther: "#f2f2f2",
}

// StageColor is the colour of a stage in charts and flame graphs.
func StageColor(id string) string {
	if c, ok := stageColors[id]; ok {
		return c
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("hsl(%d,55%%,60%%)", h.Sum32()%360)
}

func (f *flame) stageColor(name string) string {
	if strings.HasPrefix(name, "[user ") {
		return StageColor("engine")
	}
	if st := f.r.match(name); st >= 0 {
		return StageColor(f.r.Stages[st].ID)
	}
	return stageColors[StageKernelOther]
}

// diffColor: white for no change, red for more µs than the base, blue for
// less, as deep as the change is large relative to the frame's cost (a
// frame only in this profile is fully red; a trunk 10% dearer, pale).
func diffColor(delta, of float64) string {
	t := 0.0
	if of > 0 {
		t = math.Min(math.Abs(delta)/of, 1)
	}
	v := int(255 - 175*t)
	if delta > 0 {
		return fmt.Sprintf("rgb(255,%d,%d)", v, v)
	}
	return fmt.Sprintf("rgb(%d,%d,255)", v, v)
}
