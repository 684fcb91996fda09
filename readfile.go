package main

// This file holds the one way corral reads a file a person or a program
// other than corral may have put in its way: the config, secret files
// (${file:PATH}, authTokenFile, envFile) and catalog cache files.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Errors of readRegular, for callers to name the file and the fix.
var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = errors.New("too large")
)

// readRegular returns the content of the file at path, which must be a
// regular file of at most maxBytes bytes. It never blocks on what is not a
// regular file: the file is opened with O_NONBLOCK, so that opening a FIFO
// with no writer returns at once, and refused after an fstat of what was
// opened (not a stat of the path, which a rename could change in between),
// with an error wrapping errNotRegular. A file over maxBytes gets an error
// wrapping errTooLarge; other errors are those of os.OpenFile and reading.
// It is safe for concurrent use.
func readRegular(path string, maxBytes int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w (%s)", errNotRegular, fileKind(st.Mode()))
	case st.Size() > maxBytes:
		return nil, errTooLarge
	}
	// O_NONBLOCK means nothing to a regular file's reads.
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	switch {
	case err != nil:
		return nil, err
	case int64(len(data)) > maxBytes:
		return nil, errTooLarge // it grew since the fstat
	}
	return data, nil
}

// fileKind names the type of a file of mode m that is not a regular one.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.Type().String()
}
