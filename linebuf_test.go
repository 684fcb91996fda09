package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// pieces reads at most n bytes at a time from r, as a pipe gives what a
// server wrote a piece at a time.
type pieces struct {
	r io.Reader
	n int
}

func (p pieces) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }

func TestLineReaderBufferIsSmallUntilALineNeedsMore(t *testing.T) {
	// Lines short and long, arriving in pieces of 1,000 bytes, read back
	// exactly, the buffer growing once.
	long := `{"id":2,"result":"` + strings.Repeat("x", 10_000) + `"}`
	longer := `{"id":4,"result":"` + strings.Repeat("y", 100_000) + `"}`
	lines := []string{`{"id":1}`, long, `{"id":3}`, longer, `{"id":5}`}
	r := pieces{strings.NewReader(strings.Join(lines, "\n") + "\n"), 1000}
	lr := newLineReader(r, 1<<20)
	wantSize := []int{4 << 10, 64 << 10, 64 << 10, 64 << 10, 64 << 10} // 4 KiB until a line needs more
	for i, want := range lines {
		got, err := lr.next()
		if err != nil || !bytes.Equal(got, []byte(want)) {
			t.Fatalf("line %d = %.40q (%d bytes), %v; want %.40q (%d bytes)", i, got, len(got), err, want, len(want))
		}
		if lr.br.Size() != wantSize[i] {
			t.Errorf("after line %d (%d bytes) the buffer holds %d bytes, want %d", i, len(want), lr.br.Size(), wantSize[i])
		}
	}
	if _, err := lr.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last line next() = %v, want EOF", err)
	}
}

func TestLineReaderTooLongLineAfterGrowingKeepsTheReaderUsable(t *testing.T) {
	lr := newLineReader(strings.NewReader(`{"id":7,"x":"`+strings.Repeat("z", 200_000)+"\"}\n{\"id\":8}\n"), 100_000)
	_, err := lr.next()
	var tooLong *lineTooLongError
	if !errors.As(err, &tooLong) || string(tooLong.id) != "7" {
		t.Fatalf("next() on a line over the maximum = %v, want a lineTooLongError for id 7", err)
	}
	if got, err := lr.next(); err != nil || string(got) != `{"id":8}` {
		t.Errorf("the line after = %q, %v; want {\"id\":8}", got, err)
	}
}

func TestLineReaderBufferGrowsForABurstOfShortLines(t *testing.T) {
	// Lines that wait unread behind the one read are read in larger reads,
	// and none is lost when the buffer changes.
	var in strings.Builder
	for i := range 200 {
		in.WriteString(`{"jsonrpc":"2.0","id":` + strings.Repeat("1", i%7+1) + `,"result":{}}` + "\n")
	}
	want := strings.Split(strings.TrimSuffix(in.String(), "\n"), "\n")
	lr := newLineReader(strings.NewReader(in.String()), 1<<20)
	for i, w := range want {
		got, err := lr.next()
		if err != nil || string(got) != w {
			t.Fatalf("line %d = %q, %v; want %q", i, got, err, w)
		}
	}
	if lr.br.Size() != 64<<10 {
		t.Errorf("after a burst of %d short lines the buffer holds %d bytes, want %d", len(want), lr.br.Size(), 64<<10)
	}
}

// lineAtATime gives at most one line, or the rest of one, a Read: a server
// that writes a line and waits for the next request.
type lineAtATime struct{ s string }

func (r *lineAtATime) Read(b []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := len(r.s)
	if i := strings.IndexByte(r.s, '\n'); i >= 0 {
		n = i + 1
	}
	n = copy(b, r.s[:n])
	r.s = r.s[n:]
	return n, nil
}

func TestLineReaderGivesTheLargeBufferBackOnceEmpty(t *testing.T) {
	// (What the pool holds is not checked: under the race detector a
	// sync.Pool drops what it is given at random.)
	long := `{"id":2,"result":"` + strings.Repeat("x", 100_000) + `"}`
	lines := []string{`{"id":1}`, long, `{"id":3}`, long, `{"id":5}`}
	var bufs sync.Pool
	lr := newLineReader(&lineAtATime{strings.Join(lines, "\n") + "\n"}, 1<<20)
	lr.bufs = &bufs
	for i, want := range lines {
		got, err := lr.next()
		if err != nil || string(got) != want {
			t.Fatalf("line %d = %.40q (%d bytes), %v; want %.40q (%d bytes)", i, got, len(got), err, want, len(want))
		}
		if lr.br != lr.small {
			t.Errorf("after line %d (%d bytes), read whole, the reader keeps a buffer of %d bytes, want the small one", i, len(want), lr.br.Size())
		}
	}
}
