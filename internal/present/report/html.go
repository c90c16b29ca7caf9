package report

import (
	_ "embed"
	"html/template"
	"io"
)

//go:embed report.html.tmpl
var htmlTemplate string

var htmlPage = template.Must(template.New("report").Funcs(template.FuncMap{
	// The SVG is built from escaped text by this package (svg.go).
	"svg":           func(c *BarChart) template.HTML { return template.HTML(c.SVG(false)) },
	"curve":         func(c *CurveChart) template.HTML { return template.HTML(c.SVG(false)) },
	"knobNote":      func(k string) string { return knobNotes[k] },
	"enforcerTitle": func() string { return enforcerTitle },
	"capitalize":    capitalize,
	"ciMethods":     ciMethods,
}).Parse(htmlTemplate))

// HTML writes the report as one self-contained page: inline CSS and inline
// SVG charts, nothing fetched from anywhere.
func HTML(w io.Writer, d *Doc) error {
	return htmlPage.Execute(w, d)
}
