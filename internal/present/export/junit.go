package export

import (
	"encoding/xml"
	"io"
)

// The JUnit XML schema CI systems read (Jenkins, GitLab, GitHub actions'
// reporters): testsuites > testsuite > testcase, a failed case holding a
// <failure>, a skipped one a <skipped>. Four encoding/xml types say all of
// it; a JUnit library would bring its own report model to convert into.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes verdicts as JUnit XML: a test suite per Verdict.Suite
// (in order of first appearance), a test case per verdict, classname
// vnetlab.SUITE.MODE so CI systems group cases by mode.
func WriteJUnit(w io.Writer, vs []Verdict) error {
	doc := junitSuites{Name: "vnetlab"}
	index := map[string]int{}
	for _, v := range vs {
		i, ok := index[v.Suite]
		if !ok {
			i = len(doc.Suites)
			index[v.Suite] = i
			doc.Suites = append(doc.Suites, junitSuite{Name: "vnetlab " + v.Suite})
		}
		s := &doc.Suites[i]
		c := junitCase{Name: v.Name, Classname: "vnetlab." + v.Suite + "." + v.Cell.Mode}
		switch v.Outcome {
		case Fail:
			c.Failure = &junitMessage{Message: v.Message, Type: v.Verdict, Text: v.Message}
			s.Failures++
		case Skip:
			c.Skipped = &junitMessage{Message: v.Message}
			s.Skipped++
		default:
			c.SystemOut = v.Message
		}
		s.Tests++
		s.Cases = append(s.Cases, c)
	}
	for _, s := range doc.Suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Skipped += s.Skipped
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
