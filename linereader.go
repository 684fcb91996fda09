package main

import (
	"bufio"
	"bytes"
	"io"
	"sync"
)

// lineReader reads newline-delimited messages of at most max bytes, without
// the 64 KiB cap of bufio.Scanner. It is not safe for concurrent use.
//
// It reads through a buffer of lineBufSmall bytes, and through one of
// lineBufLarge only while a line does not fit the small one or lines queue
// behind the one read (the source writes faster than they are read): a
// server that is idle, or sends short lines one at a time, costs corral
// 4 KiB, not 64 (200 servers: about 16 MiB of corral's resident memory). The
// large buffer comes from bufs, if not nil, and goes back once it is empty,
// so that servers share a few; else the reader keeps the one it made.
type lineReader struct {
	small *bufio.Reader
	br    *bufio.Reader // small, or a large one reading through small
	bufs  *sync.Pool    // of large *bufio.Reader; may be nil
	max   int
}

const (
	lineBufSmall = 4 << 10
	lineBufLarge = 64 << 10
)

func newLineReader(r io.Reader, max int) *lineReader {
	small := bufio.NewReaderSize(r, lineBufSmall)
	return &lineReader{small: small, br: small, max: max}
}

// widen makes lr read through a large buffer, if it does not already. The
// large reader reads through the small one: first what that holds, copied
// once, then, with it empty, straight from the source (bufio reads a
// request as large as its buffer without buffering it).
func (lr *lineReader) widen() {
	if lr.br != lr.small {
		return
	}
	var large *bufio.Reader
	if lr.bufs != nil {
		large, _ = lr.bufs.Get().(*bufio.Reader)
	}
	if large == nil {
		large = bufio.NewReaderSize(lr.small, lineBufLarge)
	}
	large.Reset(lr.small)
	lr.br = large
}

// narrow gives the large buffer back once both buffers are empty, if lr
// borrowed it from bufs.
func (lr *lineReader) narrow() {
	if lr.br == lr.small || lr.bufs == nil || lr.br.Buffered() > 0 || lr.small.Buffered() > 0 {
		return
	}
	large := lr.br
	lr.br = lr.small
	large.Reset(nil)
	lr.bufs.Put(large)
}

// next returns the next line without its line ending, in a slice of its own.
// A line longer than the maximum is read to its end and reported as a
// *lineTooLongError; the reader stays usable. At the end of input, next
// returns io.EOF.
func (lr *lineReader) next() ([]byte, error) {
	line, err := lr.read()
	lr.narrow()
	return line, err
}

// read is next, through whichever buffer lr has.
func (lr *lineReader) read() ([]byte, error) {
	s, err := lr.br.ReadSlice('\n')
	switch {
	case err == nil && len(trimEOL(s)) <= lr.max:
		line := bytes.Clone(trimEOL(s))
		if lr.small.Buffered() >= lineBufSmall/2 {
			lr.widen() // lines queue up: read them in fewer reads
		}
		return line, nil
	case err == io.EOF && len(s) > 0 && len(s) <= lr.max:
		return bytes.Clone(s), nil // a last line without its newline
	case err != nil && err != bufio.ErrBufferFull:
		return nil, err
	}
	// Longer than the reader's buffer: gather it in pieces, up to the
	// maximum, and join them once at the line's exact size (growing one
	// buffer by doubling would peak near three times the line).
	chunks := [][]byte{bytes.Clone(s)}
	size := len(s)
	lr.widen()
	for size <= lr.max+2 && err == bufio.ErrBufferFull {
		s, err = lr.br.ReadSlice('\n')
		chunks = append(chunks, bytes.Clone(s))
		size += len(s)
	}
	if err != nil && err != bufio.ErrBufferFull && err != io.EOF {
		return nil, err
	}
	if size <= lr.max+2 {
		if line := trimEOL(bytes.Join(chunks, nil)); len(line) <= lr.max {
			return line, nil
		}
	}
	// Too long: skip to the end of the line, looking for its ID on the way.
	var sc idScanner
	for _, c := range chunks {
		sc.feed(c)
	}
	chunks = nil
	total := int64(size)
	for err == bufio.ErrBufferFull {
		s, err = lr.br.ReadSlice('\n')
		sc.feed(s)
		total += int64(len(s))
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	return nil, &lineTooLongError{size: total, max: lr.max, id: sc.id()}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}
