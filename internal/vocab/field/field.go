// Package field is bad input in one field of a typed spec, said so that
// each edge names the fields the way its user wrote them: the CLI as flags
// (--cni-mode), a scenario file as its keys (cni_mode, at its line). A
// library that validates a spec (cluster.Spec, lab.Spec, runner.Spec)
// returns an Error and never spells a flag.
package field

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Error is what is wrong with one field of a spec. Field is the field's
// scenario key (snake_case: "cni_mode"); the message refers to fields as
// {key}, rendered by whoever reports it (Render).
type Error struct {
	Field string
	msg   string
}

// Errorf is an Error about field; format may name fields as {key}.
func Errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, msg: fmt.Sprintf(format, args...)}
}

var refRE = regexp.MustCompile(`\{([a-z0-9_.]+)\}`)

// Render is the message with each {key} replaced by name(key).
func (e *Error) Render(name func(key string) string) string {
	return refRE.ReplaceAllStringFunc(e.msg, func(m string) string { return name(m[1 : len(m)-1]) })
}

// Error names the fields as flags: the command line is where most input
// comes from; an edge that read a scenario file renders its keys instead.
func (e *Error) Error() string { return e.Render(Flag) }

// Key names a field by its scenario key (Render's name for file input).
func Key(key string) string { return key }

// Flag is the command-line flag of the field key: "cni_mode" -> "--cni-mode".
func Flag(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }

// Rendered is err with its field references rendered by name when it is
// (or wraps) an Error; any other error unchanged.
func Rendered(err error, name func(key string) string) error {
	var fe *Error
	if !errors.As(err, &fe) {
		return err
	}
	// Wrapped or not: keep the context around it.
	return errors.New(strings.Replace(err.Error(), fe.Error(), fe.Render(name), 1))
}

// OneLine is msg with its control characters (a newline or a carriage
// return of outside input that a decoder quoted in its error) written as
// Go escapes, so that what vnetlab says of bad input stays one line.
func OneLine(msg string) string {
	if !strings.ContainsFunc(msg, unicode.IsControl) {
		return msg
	}
	var b strings.Builder
	for _, r := range msg {
		if unicode.IsControl(r) {
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
