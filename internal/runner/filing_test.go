package runner

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// fill sets every field under v (structs, pointers, slices and maps of
// one element) to a value of its own, so that a field the conversion
// drops shows in the JSON.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString(fmt.Sprint("s", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(uint64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	}
}

// filled is a T with every field set.
func filled[T any]() T {
	var x T
	n := 0
	fill(reflect.ValueOf(&x).Elem(), &n)
	return x
}

// The boundary keeps every field: what the measuring packages produce
// reads the same in the results' types (the same JSON, field for field).
func TestFilingKeepsEveryField(t *testing.T) {
	sweep := filled[knob.Sweep]()
	for _, c := range []struct {
		name     string
		from, to any
	}{
		{"engine.Result", filled[engine.Result](), resultOf(filled[engine.Result]())},
		{"knob.Sweep", sweep, sweepOf(sweep)},
	} {
		a, _ := json.Marshal(c.from)
		b, _ := json.Marshal(c.to)
		if string(a) != string(b) {
			t.Errorf("%s: the results' type records\n%s\nnot\n%s", c.name, b, a)
		}
	}
}

// The file records every knob set, by name, whatever its scope; the
// default rate (max) and unset knobs are left out.
func TestFilingRecordsEveryKnob(t *testing.T) {
	var s knob.Settings
	want := map[string]string{}
	for _, k := range knob.All {
		k.Set(&s, k.Example)
		want[string(k.Name)] = k.Example
	}
	if got := knobsOf(s); !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
	if got := knobsOf(knob.Settings{Streams: 1, Rate: knob.Unlimited}); !reflect.DeepEqual(got, map[string]string{"streams": "1"}) {
		t.Errorf("the defaults recorded as %v", got)
	}
}
