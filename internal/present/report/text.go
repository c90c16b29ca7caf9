package report

import "unicode/utf8"

// The text metrics every chart's layout reserves room with (and its
// test checks against): a glyph's mean advance, and how far a line of
// text reaches above and below its baseline, as fractions of the font
// size. Generous for the labels the charts show (names, mostly lower
// case, and numbers) in DejaVu Sans and Roboto, the fonts the SVG and
// the PNG are drawn in.
const (
	textAdvance     = 0.58
	boldTextAdvance = 0.64
	textAscent      = 0.8
	textDescent     = 0.25
)

// textWidth estimates a label's width; good enough to reserve room for it.
func textWidth(s string, size float64, bold bool) float64 {
	adv := textAdvance
	if bold {
		adv = boldTextAdvance
	}
	return float64(utf8.RuneCountInString(s)) * size * adv
}

// ellipsis ends a label cut to fit.
const ellipsis = "…"

// fitText is s cut to at most w wide (by textWidth), ending in an
// ellipsis when cut.
func fitText(s string, size float64, bold bool, w float64) string {
	if textWidth(s, size, bold) <= w {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && textWidth(string(r)+ellipsis, size, bold) > w {
		r = r[:len(r)-1]
	}
	if len(r) == 0 {
		return ""
	}
	return string(r) + ellipsis
}
