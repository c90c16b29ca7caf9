package image

import (
	"reflect"
	"testing"
)

func TestParseLdd(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007f22cc7ec000)
	libiperf.so.0 => /lib/x86_64-linux-gnu/libiperf.so.0 (0x00007f22cc7a4000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f22cc5c2000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f22cc7ee000)
`
	want := []string{"/lib/x86_64-linux-gnu/libiperf.so.0", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if got := ParseLdd(out); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseLdd = %v, want %v", got, want)
	}
}
