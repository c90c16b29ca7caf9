package runner

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/measure/pktstat"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/results"
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
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Unix(int64(*n), 0)))
			return
		}
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

// timeType is time.Time's: a struct of unexported fields, filled and
// compared as one value.
var timeType = reflect.TypeFor[time.Time]()

// filled is a T with every field set.
func filled[T any]() T {
	var x T
	n := 0
	fill(reflect.ValueOf(&x).Elem(), &n)
	return x
}

// sameByName says where b differs from a: every exported field of a
// (through pointers, slices and maps) is in b under the same Go name with
// the same value, as printed (a knob.Name and a string alike); b may have
// fields of its own. Fields named in skip are left out.
func sameByName(a, b reflect.Value, at string, skip map[string]bool) error {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() != b.IsNil() {
			return fmt.Errorf("%s: nil on one side only", at)
		}
		if a.IsNil() {
			return nil
		}
		return sameByName(a.Elem(), b.Elem(), at, skip)
	case reflect.Struct:
		if a.Type() == timeType {
			break // a time: compared as printed, below
		}
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() || skip[f.Name] {
				continue
			}
			bf := b.FieldByName(f.Name)
			if !bf.IsValid() {
				return fmt.Errorf("%s.%s: not in %s", at, f.Name, b.Type())
			}
			if err := sameByName(a.Field(i), bf, at+"."+f.Name, skip); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Errorf("%s: %d elements, %d recorded", at, a.Len(), b.Len())
		}
		for i := range a.Len() {
			if err := sameByName(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", at, i), skip); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if a.Len() != b.Len() {
			return fmt.Errorf("%s: %d entries, %d recorded", at, a.Len(), b.Len())
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k.Convert(b.Type().Key()))
			if !bv.IsValid() {
				return fmt.Errorf("%s[%v]: not recorded", at, k)
			}
			if err := sameByName(a.MapIndex(k), bv, fmt.Sprintf("%s[%v]", at, k), skip); err != nil {
				return err
			}
		}
		return nil
	}
	if x, y := fmt.Sprint(a.Interface()), fmt.Sprint(b.Interface()); x != y {
		return fmt.Errorf("%s: %s recorded as %s", at, x, y)
	}
	return nil
}

// The boundary keeps every field: what the measuring packages produce,
// every field set, reads the same in the results' types.
func TestFilingKeepsEveryField(t *testing.T) {
	sweep := filled[knob.Sweep]()
	packets := filled[pktstat.Proof]()
	summary, files := filled[profile.Summary](), filled[profile.Files]()
	run := filled[converge.Run]()
	seen, proof := filled[labpolicy.CellSeen](), &results.PolicyProof{}
	filePolicySeen(proof, seen)
	for _, c := range []struct {
		name     string
		from, to any
		skip     string // a field the conversion words (checked apart)
	}{
		{"engine.Result", filled[engine.Result](), resultOf(filled[engine.Result]()), ""},
		{"knob.Sweep", sweep, sweepOf(sweep), ""},
		{"pktstat.Proof", packets, packetsOf(&packets), "Note"},
		{"profile.Summary", summary, ProfileOf(&summary), ""},
		{"profile.Files", files, filesOf(files), ""},
		{"converge.Run", run, ConvergenceOf(&run, t.Logf), "Controller"},
		{"labpolicy.CellSeen", seen, proof, ""},
	} {
		if err := sameByName(reflect.ValueOf(c.from), reflect.Indirect(reflect.ValueOf(c.to)), c.name, map[string]bool{c.skip: true}); err != nil {
			t.Error(err)
		}
	}
}

// Each note of the packet counter is the file's words for it; none, none.
func TestFilingPacketNotes(t *testing.T) {
	for note, want := range map[pktstat.Note]string{pktstat.Plain: "", pktstat.SameNS: results.PacketsSameNS, pktstat.Unseen: results.PacketsUnseen} {
		if got := packetsOf(&pktstat.Proof{Note: note}).Note; got != want {
			t.Errorf("note %d recorded as %q, want %q", note, got, want)
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

// A cell's policy proof starts with its set and load time; what its
// prover saw is added to it, not over it.
func TestFilingPolicyProof(t *testing.T) {
	pp := policyProofOf(knob.PolicySet{Policies: 100, IPBlocks: 16}, 0.25)
	filePolicySeen(pp, labpolicy.CellSeen{Objects: 3, Want: 3})
	if want := (results.PolicyProof{Policies: 100, IPBlocks: 16, LoadSec: 0.25, Objects: 3, Want: 3}); *pp != want {
		t.Errorf("proof %+v, want %+v", *pp, want)
	}
}
