package main

// This file holds the stdio transport: one server's child process with its
// pipes and stop ladder, and the newline-delimited framing that both the
// servers' stdout and corral's own stdin (with -stdio) are read with.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// stderrTailLines is how many of a server's last stderr lines are kept for
// error messages.
const stderrTailLines = 20

// process is one running server: the OS process, the parent's ends of its
// three pipes, and the goroutines that own them. Its methods are safe for
// concurrent use.
type process struct {
	spec   processSpec
	pid    int // also its process group ID
	stdin  *os.File
	stdout *pipeReader
	stderr *os.File
	cg     *serverCgroup // nil unless the process runs in a cgroup of its own

	exited     chan struct{} // closed once the process has been reaped
	waitErr    error         // how it ended; set before exited is closed
	overMemory bool          // the kernel killed a process of it over its memory limit; set before exited is closed

	// sigMu orders group signals against the reaping of the leader: once the
	// leader is reaped its PID, which is also the group's ID, may be reused.
	sigMu  sync.Mutex
	reaped bool

	stderrDone chan struct{} // closed when the stderr pipe reaches EOF or is closed
	tail       lineTail

	stopOnce sync.Once
	stopped  chan struct{} // closed when Stop has finished
}

// startProcess starts the server described by spec in a process group of its
// own, with pipes for stdin, stdout and stderr. It returns once the process
// has started; stderr is drained into spec.log from then on. The caller reads
// p.stdout and must call Stop.
func startProcess(spec processSpec) (*process, error) {
	cmd, cg, plan, err := containedCommand(spec)
	if err != nil {
		return nil, fmt.Errorf("starting server %q: %w", spec.name, notFound(spec.command, spec.pathList(), err))
	}
	cmd.Env = spec.env
	cmd.Dir = spec.dir
	setProcAttr(cmd)
	plan.procAttr(cmd.SysProcAttr)

	// Pipes of our own rather than cmd.StdoutPipe: Wait must not close the
	// read ends under the reader, and a crash is seen by Wait, not by EOF.
	var files []*os.File
	pipe := func() (r, w *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil
		}
		files = append(files, r, w)
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if len(files) != 6 {
		closeAll(files)
		cg.remove()
		return nil, fmt.Errorf("starting server %q: cannot create pipes", spec.name)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if spec.detached {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}

	p := &process{
		spec:       spec,
		stdin:      inW,
		stdout:     &pipeReader{f: outR, eof: make(chan struct{})},
		stderr:     errR,
		cg:         cg,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	p.tail.max = stderrTailLines
	started := make(chan error, 1)
	go p.own(cmd, started)
	err = <-started
	closeAll([]*os.File{inR, outW, errW}) // the child's ends, now the child's alone
	if err != nil {
		closeAll([]*os.File{inW, outR, errR})
		cg.remove()
		return nil, fmt.Errorf("starting server %q: %w", spec.name, notFound(spec.command, spec.pathList(), sandboxStartError(cmd, err)))
	}
	go p.drainStderr()
	return p, nil
}

// notFound returns err, an error starting command, in words a person can
// act on when it is that command is not there: "command "uvx" not found on
// PATH" rather than os/exec's "executable file not found in $PATH". path is
// the PATH the command was looked for in (the server's env's, else
// corral's).
func notFound(command, path string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return fmt.Errorf("command %q not found on PATH (%s); install it, or write its full path in \"command\"", command, shortPath(path))
	case errors.Is(err, os.ErrNotExist) && strings.Contains(command, "/"):
		return fmt.Errorf("command %q does not exist", command)
	}
	return err
}

// shortPath returns path, a PATH, for a message: whole if short, else cut.
func shortPath(path string) string {
	const max = 120
	if path == "" {
		return "PATH is empty"
	}
	if len(path) > max {
		return "PATH=" + path[:max] + "..."
	}
	return "PATH=" + path
}

// own starts cmd and stays with it until it is reaped. It runs on a goroutine
// locked to its OS thread for the child's whole life, because Linux sends the
// parent-death signal when the thread that forked the child exits, not when
// the process does (go.dev/issue/27505). The thread is never unlocked, so it
// exits with this goroutine, once the child is already gone.
func (p *process) own(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread()
	err := p.spec.reaper.start(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		started <- err
		return
	}
	p.pid = cmd.Process.Pid
	// Unreaped until Wait below, the PID names this process: from now on
	// it cannot leave its cgroup unseen.
	p.spec.cgroups.tie(p.pid, p.spec.name)
	started <- nil
	defer p.spec.reaper.reaped(p.pid)

	// What the leader leaves behind in its group dies with it: the group is
	// killed after the leader exits but before it is reaped, while the group
	// ID cannot yet have been reused.
	if waitExitedNoReap(p.pid) == nil {
		p.sigMu.Lock()
		signalGroup(p.pid, syscall.SIGKILL)
		p.reaped = true
		p.sigMu.Unlock()
		p.waitErr = cmd.Wait()
	} else {
		p.waitErr = cmd.Wait()
		p.sigMu.Lock()
		signalGroup(p.pid, syscall.SIGKILL) // racy without waitid; see killpg_other.go
		p.reaped = true
		p.sigMu.Unlock()
	}
	// What left the group (setsid, a double fork, a cleared environment)
	// but not the cgroup dies now too, and the cgroup goes.
	if p.overMemory = p.cg.finish(p.spec.log); p.overMemory {
		p.spec.log.Error("the kernel killed a process of the server: it went over its memory limit", "limit", formatSize(p.cg.memLimit))
	}
	close(p.exited)
}

// signal sends sig to the process's group, unless the leader has been reaped.
func (p *process) signal(sig syscall.Signal) {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	if !p.reaped {
		if err := signalGroup(p.pid, sig); err != nil {
			p.spec.log.Warn("cannot signal process group", "pgid", p.pid, "signal", sig, "err", err)
		}
	}
}

// Stop stops the process the way the MCP specification asks a client to and
// blocks until it has been reaped, every process left in its group has been
// killed, and its pipes are closed. Before anything else, where the process
// runs in a cgroup, what left that cgroup is killed (killEscapees). Closing
// hurry skips the remaining waits and kills at once. Stop may be called more
// than once and concurrently; every call blocks until the first has
// finished.
func (p *process) Stop(hurry <-chan struct{}) {
	p.stopOnce.Do(func() {
		// While the server runs, what left its cgroup is still tied to it
		// through its parents: kill that first.
		if p.cg != nil {
			p.spec.cgroups.killEscapees()
		}
		// "the client SHOULD initiate shutdown by first closing the input
		// stream to the child process (the server)"
		p.stdin.Close()
		if !p.waitExited(p.spec.stopGrace, hurry) {
			// "If the server does not exit within a reasonable time, the client
			// SHOULD send SIGTERM"
			p.spec.log.Info(p.spec.what()+" did not exit after stdin was closed; sending SIGTERM", "after", p.waited(p.spec.stopGrace, hurry))
			p.signal(syscall.SIGTERM)
			if !p.waitExited(p.spec.killGrace, hurry) {
				// "If the server has not exited within a reasonable time after
				// SIGTERM, the client SHOULD send SIGKILL"
				p.spec.log.Warn(p.spec.what()+" did not exit after SIGTERM; sending SIGKILL", "after", p.waited(p.spec.killGrace, hurry))
				p.signal(syscall.SIGKILL)
				<-p.exited
			}
		}
		p.closePipes()
		close(p.stopped)
	})
	<-p.stopped
}

// waitExited reports whether the process exits within d. It returns false at
// once when hurry is closed.
func (p *process) waitExited(d time.Duration, hurry <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-hurry:
		return false
	case <-t.C:
		return false
	}
}

// waited says, for the log, how long a wait of at most d that did not see
// the process exit lasted: d, or less when hurry cut it short.
func (p *process) waited(d time.Duration, hurry <-chan struct{}) string {
	select {
	case <-hurry:
		return "less than " + d.String() + " (corral was told to stop at once)"
	default:
		return d.String()
	}
}

// closePipes waits, at most pipeDrain, for stdout and stderr to reach EOF so
// that the last lines are not lost, then closes the read ends. Closing them
// ends any read still blocked because a descendant holds a write end open.
func (p *process) closePipes() {
	t := time.NewTimer(p.spec.pipeDrain)
	defer t.Stop()
wait:
	for _, done := range []chan struct{}{p.stdout.eof, p.stderrDone} {
		select {
		case <-done:
		case <-t.C:
			break wait
		}
	}
	p.stdout.f.Close()
	p.stderr.Close()
	<-p.stderrDone
}

// exitDescription says how the process ended: "exit status 3",
// "signal: killed". It must be called after exited is closed.
func (p *process) exitDescription() string {
	if p.overMemory {
		return overMemoryDescription(p.waitErr, p.cg.memLimit)
	}
	if p.waitErr == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ProcessState.String()
	}
	return p.waitErr.Error()
}

// drainStderr copies the server's stderr into the log and keeps its last
// lines for error messages (see drainLines).
func (p *process) drainStderr() {
	defer close(p.stderrDone)
	drainLines(p.stderr, &p.tail, p.spec.log, p.spec.quiet,
		firstSet(p.spec.stderrLines, defaultMaxStderrLines), firstSet(p.spec.stderrBytes, defaultMaxStderrBytes))
}

// drainLines reads r, a server's stderr, to its end, a line at a time: each
// line goes to tail, and to log as long as the server stays within lineRate
// lines and byteRate bytes a second (see stderrLimit). It never stops
// reading, so a server that writes much to stderr is never blocked by
// corral, nor can it flood corral's log. Boilerplate lines (see
// isBoilerplate) are logged at debug level, and so is every line while
// quiet, if not nil, is set. It returns once the lines it left out
// of the log have been counted in it.
func drainLines(r io.Reader, tail *lineTail, log *slog.Logger, quiet *atomic.Bool, lineRate, byteRate int) {
	limit := newStderrLimit(lineRate, byteRate, func(lines, bytes int) {
		log.Warn("stderr lines left out of the log: the server wrote more than maxStderrLinesPerSecond or maxStderrBytesPerSecond allow",
			"lines", lines, "bytes", bytes)
	})
	defer limit.close()
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := br.ReadSlice('\n')
		// A line longer than the buffer is logged in pieces.
		if s := strings.TrimRight(string(line), "\r\n"); s != "" {
			tail.add(s)
			if limit.allow(time.Now(), len(s)) {
				level := stderrLevel(s)
				if quiet != nil && quiet.Load() || isBoilerplate(s) {
					level = slog.LevelDebug
				}
				log.Log(context.Background(), level, "stderr: "+s)
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// stderrLimit decides which of a server's stderr lines are logged: a token
// bucket each for lines and bytes, refilled at its rate a second and holding
// at most one second's worth, so that a burst of up to a second's worth is
// logged whole and a flood at the rates. It counts the lines it turns away
// and has report called with their number, at most once a second while they
// last (one second after the first), and at close. Its methods are safe for
// concurrent use.
type stderrLimit struct {
	report func(lines, bytes int)

	mu                    sync.Mutex
	lines, bytes          tokenBucket
	dropped, droppedBytes int         // not yet reported
	timer                 *time.Timer // armed while dropped lines wait to be reported
	timers                sync.WaitGroup
}

func newStderrLimit(lineRate, byteRate int, report func(lines, bytes int)) *stderrLimit {
	return &stderrLimit{
		report: report,
		lines:  tokenBucket{rate: float64(lineRate)},
		bytes:  tokenBucket{rate: float64(byteRate)},
	}
}

// allow reports whether a line of size bytes, read at now, may be logged,
// and counts it if not. A line longer than a second's worth of bytes costs
// a second's worth.
func (l *stderrLimit) allow(now time.Time, size int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines.refill(now)
	l.bytes.refill(now)
	if cost := min(float64(size), l.bytes.rate); l.lines.tokens >= 1 && l.bytes.tokens >= cost {
		l.lines.tokens--
		l.bytes.tokens -= cost
		return true
	}
	l.dropped++
	l.droppedBytes += size
	if l.timer == nil {
		l.timers.Add(1)
		l.timer = time.AfterFunc(time.Second, func() {
			defer l.timers.Done()
			l.flush()
		})
	}
	return false
}

// flush reports the lines dropped and not yet reported, if any.
func (l *stderrLimit) flush() {
	l.mu.Lock()
	n, size := l.dropped, l.droppedBytes
	l.dropped, l.droppedBytes, l.timer = 0, 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.report(n, size)
	}
}

// close reports what is left to report and returns once no report is under
// way. The limit must not be used after.
func (l *stderrLimit) close() {
	l.mu.Lock()
	if l.timer != nil && l.timer.Stop() {
		l.timers.Done() // its function will never run
	}
	l.mu.Unlock()
	l.flush()
	l.timers.Wait()
}

// tokenBucket holds up to rate tokens, refilled at rate tokens a second. It
// starts full. It is not safe for concurrent use.
type tokenBucket struct {
	rate   float64
	tokens float64
	last   time.Time // of the last refill; zero before the first
}

// refill adds the tokens due since the last refill, up to rate.
func (b *tokenBucket) refill(now time.Time) {
	if b.last.IsZero() {
		b.tokens = b.rate
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.rate, b.tokens+d.Seconds()*b.rate)
	}
	b.last = now
}

// stderrLevel guesses the level of a server's stderr line from the way
// logging libraries write it: a leading level word ("ERROR ...", "[warn]",
// npm's "npm error" and "npm ERR!"; "W1121 ..." is not recognised), or a
// level=..., "level":"..." or "severity":"..." field, whose value may be a
// number on pino's and bunyan's scale (10 trace, 20 debug, 30 info, 40 warn,
// 50 error, 60 fatal). Anything else is info.
func stderrLevel(line string) slog.Level {
	l := strings.ToLower(line)
	word := strings.TrimLeft(strings.TrimPrefix(l, "npm "), " \t[<(")
	if i := strings.IndexAny(word, " \t]>):|!"); i >= 0 {
		word = word[:i]
	}
	// A JSON field first: a message may say "level=".
	for _, field := range []string{`"level":`, `"severity":`, "level="} {
		if i := strings.Index(l, field); i >= 0 {
			word = strings.TrimLeft(l[i+len(field):], ` "`)
			if j := strings.IndexAny(word, "\" ,}"); j >= 0 {
				word = word[:j]
			}
			break
		}
	}
	if n, err := strconv.Atoi(word); err == nil {
		switch {
		case n < 30:
			return slog.LevelDebug
		case n < 40:
			return slog.LevelInfo
		case n < 50:
			return slog.LevelWarn
		}
		return slog.LevelError
	}
	switch word {
	case "error", "err", "fatal", "panic", "critical", "crit", "emerg", "alert":
		return slog.LevelError
	case "warn", "warning":
		return slog.LevelWarn
	case "debug", "trace":
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// failureLine returns the line of lines, a server's last stderr lines, that
// best says why it failed: the last one that is not boilerplate of npm, uv,
// pip or Node.js (see isBoilerplate). Of a block of npm's error lines it is
// the first that says what failed ("404 Not Found - GET ...", not "code
// E404"); of a stack trace, the error above its frames. When every line is
// boilerplate it is the last line; with no lines, "".
func failureLine(lines []string) string {
	i := len(lines) - 1
	for i >= 0 && isBoilerplate(lines[i]) {
		i--
	}
	switch {
	case i < 0:
		if len(lines) == 0 {
			return ""
		}
		return lines[len(lines)-1]
	case npmMessage(lines[i]) != "":
		first := i
		for first > 0 && npmMessage(lines[first-1]) != "" {
			first--
		}
		for _, line := range lines[first : i+1] {
			if !isNPMHeader(npmMessage(line)) && !isBoilerplate(line) {
				return line
			}
		}
	case isTraceLine(lines[i]):
		for k := i; k >= 0; k-- {
			if isErrorHeader(lines[k]) {
				return lines[k]
			}
		}
	}
	return lines[i]
}

// boilerplate are the starts of lines, after a leading "npm error ", "npm
// ERR! " or spaces, that npm, uv, pip and Node.js write around the line that
// says what went wrong, or while a run goes well: where to find npm's log,
// npm's advice and notices, uv's and pip's progress, pip's upgrade notice,
// Node.js's version under a stack trace.
var boilerplate = []string{
	// npm
	"A complete log of this run can be found in",
	"Note that you can also install from a",
	"tarball, folder, http url, or git url.",
	"This is related to npm not being able to find a file.",
	"Log files were not written due to an error writing to the directory",
	"You can rerun the command with `--loglevel=verbose`",
	"npm notice", "npm warn", "npm WARN",
	// uv and pip
	"Resolved ", "Prepared ", "Installed ", "Uninstalled ", "Audited ", "Built ", "Building ",
	"Downloading ", "Downloaded ", "Collecting ", "Requirement already satisfied",
	"Successfully installed", "Installing collected packages", "Using cached ",
	"[notice] ", "WARNING: You are using pip version", "You should consider upgrading via",
	"WARNING: Running pip as the 'root' user",
	// Node.js
	"Node.js v",
}

// isBoilerplate reports whether line is one that says nothing of why a
// server failed (see boilerplate), or a line of npm's error output with no
// message at all ("npm error 404"), or a path alone (npm 6 writes its log's
// path on a line of its own), or a package uv or pip lists as installed.
func isBoilerplate(line string) bool {
	rest := strings.TrimSpace(line)
	if m := npmMessage(line); m != "" {
		rest = strings.TrimSpace(m)
		if rest == "" || isNPMHeader(rest) && !strings.Contains(rest, " ") {
			return true
		}
	}
	if strings.HasSuffix(rest, ".log") && !strings.Contains(rest, " ") ||
		(strings.HasPrefix(rest, "+ ") || strings.HasPrefix(rest, "- ")) && strings.Contains(rest, "==") {
		return true
	}
	for _, b := range boilerplate {
		if strings.HasPrefix(rest, b) {
			return true
		}
	}
	return false
}

// npmMessage returns what follows "npm error" or "npm ERR!" in line (with
// at least a space, so never "" for such a line), or "" if line is not one
// of npm's error lines.
func npmMessage(line string) string {
	for _, p := range []string{"npm error", "npm ERR!"} {
		if rest, ok := strings.CutPrefix(line, p); ok && (rest == "" || rest[0] == ' ') {
			return rest + " "
		}
	}
	return ""
}

// isNPMHeader reports whether m, what follows "npm error", is one of the
// lines npm writes before the one that says what failed: the error's code,
// errno, syscall or path, or its code alone ("404", "enoent").
func isNPMHeader(m string) bool {
	f := strings.Fields(m)
	if len(f) == 0 {
		return true
	}
	switch f[0] {
	case "code", "errno", "syscall", "path":
		return true
	}
	return len(f) == 1 && strings.Trim(f[0], "0123456789") == "" || len(f) == 1 && strings.ToLower(f[0]) == f[0] && strings.HasPrefix(f[0], "e")
}

// isTraceLine reports whether line is part of a stack trace below its
// error line: a frame, or the fields of the error Node.js prints after
// them, or Python's "  File ..." lines.
func isTraceLine(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "at ") || t == "}" || t == "]" || strings.HasPrefix(t, "File \"") ||
		line != t && strings.Contains(t, ": ") && !strings.Contains(t[:strings.Index(t, ": ")], " ")
}

// isErrorHeader reports whether line starts as an error's first line does
// in a stack trace: "Error: ...", "TypeError: ...", "Error [CODE]: ...".
func isErrorHeader(line string) bool {
	name, _, ok := strings.Cut(line, ":")
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(name, " [")
	name = strings.TrimPrefix(name, "Uncaught ")
	return !strings.ContainsAny(name, " \t") && (strings.HasSuffix(name, "Error") || strings.HasSuffix(name, "Exception"))
}

// pipeReader is the read end of a pipe that records when a read first fails.
type pipeReader struct {
	f    *os.File
	once sync.Once
	eof  chan struct{}
}

func (r *pipeReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if err != nil {
		r.once.Do(func() { close(r.eof) })
	}
	return n, err
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// lineTail keeps the last max lines added to it. It is safe for concurrent use.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (t *lineTail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == t.max {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:t.max-1]
	}
	t.lines = append(t.lines, s)
}

// last returns the last line added, or "".
func (t *lineTail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return t.lines[len(t.lines)-1]
}

// reason returns the line kept that best says why the server failed (see
// failureLine), or "".
func (t *lineTail) reason() string {
	return failureLine(t.all())
}

// all returns a copy of the lines kept, oldest first.
func (t *lineTail) all() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// lineConn is a msgConn over a byte stream each way, one message a line:
// a child's stdout and stdin. ReadMessage reads lines of at most maxLine
// bytes (a longer one is a *lineTooLongError); WriteMessage writes the
// message and its newline in one write. It is a lineWriter too: the mux
// writes whole lines to it, and, when w is a pipe that the runtime polls
// (as os.Pipe makes them), writes them without waiting (TryWriteLines).
type lineConn struct {
	lr    *lineReader
	w     io.Writer
	raw   syscall.RawConn // w's, when TryWriteLines works on it; else nil
	close func() error    // if not nil, what Close does

	// try is the state of the TryWriteLines under way, and tryFn its step.
	try struct {
		p   []byte
		n   int
		err error
	}
	tryFn func(fd uintptr) bool
}

// newLineConn returns a connection that reads r and writes w; Close calls
// close, if not nil.
func newLineConn(r io.Reader, w io.Writer, maxLine int, close func() error) *lineConn {
	c := &lineConn{lr: newLineReader(r, maxLine), w: w, raw: nonBlocking(w), close: close}
	c.tryFn = c.tryWrite
	return c
}

// nonBlocking returns the raw connection of w if w is a file in
// non-blocking mode, which the runtime's poller then waits on; else nil.
func nonBlocking(w io.Writer) syscall.RawConn {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	var nb bool
	raw.Control(func(fd uintptr) {
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nb = errno == 0 && flags&syscall.O_NONBLOCK != 0
	})
	if !nb {
		return nil
	}
	return raw
}

// conn returns the connection over the process's pipes, for messages of at
// most maxLine bytes. Its Close stops the process (see Stop). Its reader
// borrows large buffers from bufs, if not nil (see lineReader).
func (p *process) conn(maxLine int, hurry <-chan struct{}, bufs *sync.Pool) *lineConn {
	c := newLineConn(p.stdout, p.stdin, maxLine, func() error { p.Stop(hurry); return nil })
	c.lr.bufs = bufs
	return c
}

func (c *lineConn) ReadMessage() ([]byte, error) { return c.lr.next() }

func (c *lineConn) WriteMessage(msg []byte) error {
	return c.WriteLines(append(msg[:len(msg):len(msg)], '\n'))
}

// WriteLines writes p, whole lines, and blocks until it is written.
func (c *lineConn) WriteLines(p []byte) error {
	_, err := c.w.Write(p)
	return err
}

func (c *lineConn) canTry() bool { return c.raw != nil }

// TryWriteLines writes as much of p as the pipe holds room for now, and
// returns at once. Only a lineConn whose canTry is true may be asked, and
// only by one goroutine at a time (the mux's writer of the moment).
func (c *lineConn) TryWriteLines(p []byte) (int, error) {
	c.try.p, c.try.n, c.try.err = p, 0, nil
	err := c.raw.Write(c.tryFn)
	n := c.try.n
	if err == nil {
		err = c.try.err
	}
	c.try.p = nil
	return n, err
}

// tryWrite is TryWriteLines' step on the pipe's descriptor; it keeps its
// state in c.try so that a write allocates nothing.
func (c *lineConn) tryWrite(fd uintptr) bool {
	t := &c.try
	for t.n < len(t.p) {
		k, errno := syscall.Write(int(fd), t.p[t.n:])
		if k > 0 {
			t.n += k
		}
		switch {
		case errno == syscall.EINTR:
		case errno == syscall.EAGAIN:
			return true // full: the caller leaves the rest to a goroutine that may wait
		case errno != nil:
			t.err = errno
			return true
		case k <= 0:
			t.err = io.ErrShortWrite
			return true
		}
	}
	return true
}

func (c *lineConn) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// idScanner finds the raw value of the top-level "id" member of a JSON object
// fed to it in pieces, in constant memory. It is how a line too long to keep
// is matched to the request it answers. Its zero value is ready to use.
type idScanner struct {
	s jsonScanner
}

// maxScannedID is the longest ID kept from a scan; a string may have one
// byte more.
const maxScannedID = 256

// feed scans b, the next bytes of the line.
func (s *idScanner) feed(b []byte) {
	if s.s.top == 0 {
		s.s.capture, s.s.max, s.s.top = "id", maxScannedID+1, 1
	}
	for i := 0; i < len(b) && !s.s.hasTok; {
		switch {
		case s.s.inStr:
			i, _, _ = s.s.str(b, i)
			continue
		case b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n':
			s.s.space()
		default:
			s.s.out(b, i)
		}
		i++
	}
}

// id returns the raw JSON of the "id" member, or nil if none was seen whole
// or it is not a valid ID (see validID): an array or object ID is cut at its
// first comma, and must not be echoed in an answer.
func (s *idScanner) id() []byte {
	v := s.s.first()
	if len(v) > maxScannedID && v[0] != '"' || !validID(v) {
		return nil
	}
	return v
}

func isTooLong(err error) bool {
	var tooLong *lineTooLongError
	return errors.As(err, &tooLong)
}
