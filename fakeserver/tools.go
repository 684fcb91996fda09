//go:build linux || darwin

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// A tool is a tool the server offers.
type tool struct {
	name        string // prefix included
	description string
	props       map[string]property // properties of the input schema
	schema      json.RawMessage     // if not nil, the input schema as listed, props unused
	run         func(c *call, args json.RawMessage)
}

// property is a property of a tool's input schema.
type property struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

// content is an item of the content of a tool's result.
type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolResult is the result of tools/call.
type toolResult struct {
	Content []content `json:"content"`
	IsError bool      `json:"isError,omitempty"`
}

// addTools fills s.tools and s.byName.
func (s *server) addTools() {
	add := func(name, description string, props map[string]property, run func(*call, json.RawMessage)) {
		if props == nil {
			props = map[string]property{}
		}
		t := &tool{name: s.opts.prefix + name, description: description, props: props, run: run}
		s.tools = append(s.tools, t)
		s.byName[t.name] = t
	}
	integer := func(description string) property { return property{"integer", description} }

	add("echo", "Answers the given text, after an optional delay.", map[string]property{
		"text":     {"string", "Text to answer."},
		"delay_ms": integer("Milliseconds to wait before answering."),
	}, s.echo)
	add("whoami", `Answers {"name":NAME,"pid":PID} as text, with "env":VALUE when $WHOAMI_VALUE is set.`, nil, s.whoami)
	add("sleep", `Answers "slept" after the given time, unless cancelled.`, map[string]property{
		"ms": integer("Milliseconds to sleep."),
	}, s.sleep)
	add("hang", "Never answers.", nil, s.hang)
	add("wait", `Answers "released" once the given file exists, unless cancelled.`, map[string]property{
		"file": {"string", "Path of the file to wait for."},
	}, s.wait)
	add("big", "Answers a text of the given length.", map[string]property{
		"bytes": integer("Length of the text."),
	}, s.big)
	add("stderr", `Writes the given number of bytes to stderr, then answers "done".`, map[string]property{
		"bytes": integer("Number of bytes to write."),
	}, s.stderrTool)
	add("garbage", `Writes the given number of non-JSON lines to stdout, then answers "done".`, map[string]property{
		"lines": integer("Number of lines to write."),
	}, s.garbage)
	add("crash", "Exits at once with the given code, without answering.", map[string]property{
		"code": integer("Exit code (default 1)."),
	}, s.crash)
	add("list_changed", `Sends notifications/tools/list_changed, then answers "sent".`, nil,
		s.notifier("notifications/tools/list_changed"))
	add("flood", `Sends the given number of notifications/message at once, then answers "done".`, map[string]property{
		"count": integer("Number of notifications."),
	}, s.flood)
	add("touch", `Increments the counter resource, notifying subscribers, then answers "counter N".`, nil, s.touch)
	add("resources_changed", `Sends notifications/resources/list_changed, then answers "sent".`, nil,
		s.notifier("notifications/resources/list_changed"))
	add("prompts_changed", `Sends notifications/prompts/list_changed, then answers "sent".`, nil,
		s.notifier("notifications/prompts/list_changed"))
	add("progress", `Sends progress notifications if asked to, then answers "done STEPS".`, map[string]property{
		"steps":    integer("Number of steps (default 3)."),
		"delay_ms": integer("Milliseconds to wait between steps."),
	}, s.progress)
	add("log", `Sends notifications/message unless filtered, then answers "logged" or "filtered".`, map[string]property{
		"level": {"string", `Logging level (default "info").`},
		"data":  {"string", `Data to log (default "hello").`},
	}, s.log)
	add("sample", "Asks the client for sampling/createMessage and answers what it sampled.", map[string]property{
		"prompt": {"string", `Text to sample from (default "hi").`},
	}, s.sample)
	add("elicit", "Asks the client for elicitation/create and answers its result.", map[string]property{
		"message": {"string", `Message to show the user (default "name?").`},
	}, s.elicit)
	add("roots", "Asks the client for roots/list and answers its roots.", nil, s.roots)
	add("roots_later", "Answers at once, then asks the client for roots/list outside any call.", map[string]property{
		"delay_ms": integer("Milliseconds after the answer (default 100)."),
	}, s.rootsLater)
	add("task", `Answers "task done MS" after MS; called as a task (with -capabilities ...,tasks), creates one that ends so.`, map[string]property{
		"ms":     integer("Milliseconds until done (default 200)."),
		"elicit": {"boolean", "Called as a task: ask the client (elicitation/create) first."},
		"early":  {"boolean", "Called as a task: send the task's status before the answer that creates it."},
	}, s.taskTool)
	add("links", "Answers a resource_link and an embedded resource of its own resources.", nil, s.links)
	add("alloc", `Allocates and keeps the given MiB of memory, then answers "allocated N MiB".`, map[string]property{
		"mib": integer("MiB to allocate."),
	}, s.alloc)
	add("fork", `Starts the given number of sleeping processes and answers "started K of N".`, map[string]property{
		"count":       integer("Number of processes."),
		"keep_trying": {"boolean", "Try again after a failed start, as a fork bomb does."},
	}, s.fork)
	add("meta", `Answers the params._meta of its call as JSON text ("{}" if none).`, nil, s.metaTool)
	s.addProbes(add)
	add("flood_sampling", "Sends many sampling/createMessage at once and answers a tally of the answers.", map[string]property{
		"count":   integer("Number of requests."),
		"answers": integer("Answers to wait for (default count)."),
		"bytes":   integer("Length of each request's prompt text."),
		"cancel":  {"boolean", "Cancel every request at once instead of waiting."},
	}, s.floodSampling)
	if s.opts.paramHeaders {
		add("params", "Answers its arguments as compact JSON text; region, count and opts.dry are marked with x-mcp-header.", nil, s.echoArgs)
		s.byName[s.opts.prefix+"params"].schema = json.RawMessage(`{"type":"object","properties":{` +
			`"region":{"type":"string","x-mcp-header":"Region"},"count":{"type":"integer","x-mcp-header":"Count"},` +
			`"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}},"query":{"type":"string"}}}`)
		add("bad_header", "Has x-mcp-header on a number, which MCP 2026-07-28 forbids: a client leaves it out.", nil, s.echoArgs)
		s.byName[s.opts.prefix+"bad_header"].schema = json.RawMessage(`{"type":"object","properties":{"ratio":{"type":"number","x-mcp-header":"Ratio"}}}`)
	}
	if s.opts.ui {
		add("app", "An MCP App's tool: answers \"app\"; its view is the resource its _meta.ui.resourceUri names.", nil,
			func(c *call, _ json.RawMessage) { replyText(c, "app") })
	}
	for i := range s.opts.extraTools {
		add(fmt.Sprintf("tool_%03d", i), "Extra tool: answers like whoami.", nil, s.whoami)
	}
}

// replyText answers c with a text result.
func replyText(c *call, text string) {
	c.reply(toolResult{Content: []content{{Type: "text", Text: text}}})
}

// replyToolError answers c with a text result flagged as an error.
func replyToolError(c *call, text string) {
	c.reply(toolResult{Content: []content{{Type: "text", Text: text}}, IsError: true})
}

// decodeArgs decodes a tool's arguments into v. If that fails, it answers
// c with an error and reports false.
func decodeArgs(c *call, args json.RawMessage, v any) bool {
	if err := decodeParams(args, v); err != nil {
		c.fail(codeInvalidParams, "invalid arguments: "+err.Error())
		return false
	}
	return true
}

// nonNegative answers c with an error and reports false if n is negative.
func nonNegative(c *call, name string, n int) bool {
	if n < 0 {
		c.fail(codeInvalidParams, fmt.Sprintf("invalid arguments: %s must not be negative", name))
		return false
	}
	return true
}

// sleepCtx waits for ms milliseconds. It reports false if ctx is done first.
func sleepCtx(ctx context.Context, ms int) bool {
	if ms <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *server) echo(c *call, args json.RawMessage) {
	var a struct {
		Text    string `json:"text"`
		DelayMS int    `json:"delay_ms"`
	}
	if !decodeArgs(c, args, &a) || !sleepCtx(c.ctx, a.DelayMS) {
		return
	}
	replyText(c, a.Text)
}

// echoArgs answers a tool's arguments as compact JSON text (-param-headers).
func (s *server) echoArgs(c *call, args json.RawMessage) {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	replyText(c, string(compact(args)))
}

func (s *server) whoami(c *call, args json.RawMessage) {
	b, err := json.Marshal(struct {
		Name string `json:"name"`
		PID  int    `json:"pid"`
		Env  string `json:"env,omitempty"`
	}{s.opts.name, s.pid, os.Getenv("WHOAMI_VALUE")})
	if err != nil {
		panic(err) // cannot happen
	}
	replyText(c, string(b))
}

func (s *server) sleep(c *call, args json.RawMessage) {
	var a struct {
		MS int `json:"ms"`
	}
	if !decodeArgs(c, args, &a) || !sleepCtx(c.ctx, a.MS) {
		return
	}
	replyText(c, "slept")
}

func (s *server) hang(c *call, args json.RawMessage) {
	<-c.ctx.Done()
}

// waitPoll is how often the wait tool looks for its file: a test that
// creates the file waits at most this long more for the answer.
const waitPoll = 10 * time.Millisecond

// wait answers once a.File exists. It lets a test hold a call in flight for
// exactly as long as it needs, whatever the machine's load, where a sleep
// would end on its own.
func (s *server) wait(c *call, args json.RawMessage) {
	var a struct {
		File string `json:"file"`
	}
	if !decodeArgs(c, args, &a) {
		return
	}
	if a.File == "" {
		c.fail(codeInvalidParams, "invalid arguments: file is required")
		return
	}
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	for {
		if _, err := os.Stat(a.File); err == nil {
			replyText(c, "released")
			return
		}
		select {
		case <-t.C:
		case <-c.ctx.Done():
			return
		}
	}
}

func (s *server) big(c *call, args json.RawMessage) {
	var a struct {
		Bytes int `json:"bytes"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "bytes", a.Bytes) {
		return
	}
	b := make([]byte, a.Bytes)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	replyText(c, string(b))
}

func (s *server) stderrTool(c *call, args json.RawMessage) {
	var a struct {
		Bytes int `json:"bytes"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "bytes", a.Bytes) {
		return
	}
	s.writeStderr(logLines("stderr tool line", a.Bytes))
	replyText(c, "done")
}

func (s *server) garbage(c *call, args json.RawMessage) {
	var a struct {
		Lines int `json:"lines"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "lines", a.Lines) {
		return
	}
	if a.Lines > 0 {
		var buf bytes.Buffer
		for i := range a.Lines {
			fmt.Fprintf(&buf, "this is not json %d\n", i)
		}
		s.writeStdout(buf.Bytes())
	}
	replyText(c, "done")
}

func (s *server) crash(c *call, args json.RawMessage) {
	var a struct {
		Code *int `json:"code"`
	}
	if !decodeArgs(c, args, &a) {
		return
	}
	code := 1
	if a.Code != nil {
		code = *a.Code
	}
	s.logf("crashing with code %d", code)
	s.exit(code, "crash tool")
}

// notifier returns a tool that sends the change notification method, then
// answers "sent". The notification goes to the listen streams that asked for
// it and, if the call is a legacy request, out of any stream too.
func (s *server) notifier(method string) func(*call, json.RawMessage) {
	return func(c *call, args json.RawMessage) {
		if c.modern == nil {
			s.send(notification{JSONRPC: "2.0", Method: method})
		}
		s.notifyListeners(method, "")
		replyText(c, "sent")
	}
}

// logThreshold returns the index in logLevels of the least severe level c
// may send notifications/message of, or len(logLevels) if it may send none.
func (s *server) logThreshold(c *call) int {
	if c.modern != nil {
		if c.modern.logLevel == "" {
			return len(logLevels) // no logLevel, no notifications/message
		}
		return slices.Index(logLevels, c.modern.logLevel)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Index(logLevels, s.logLevel) // -1 if never set
}

// flood writes count notifications/message in one write, then answers.
func (s *server) flood(c *call, args json.RawMessage) {
	var a struct {
		Count int `json:"count"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "count", a.Count) {
		return
	}
	if c.modern != nil && slices.Index(logLevels, "info") < s.logThreshold(c) {
		replyText(c, "filtered")
		return
	}
	var buf bytes.Buffer
	for i := range a.Count {
		fmt.Fprintf(&buf, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"flood %d"}}`+"\n", i)
	}
	s.writeStdout(buf.Bytes())
	replyText(c, "done")
}

// logLines returns n bytes of numbered log lines starting with prefix, each
// at most 100 bytes long, newline included.
func logLines(prefix string, n int) []byte {
	const maxLen = 100
	var buf bytes.Buffer
	buf.Grow(n)
	for i := 0; n > 0; i++ {
		size := min(n, maxLen)
		line := fmt.Sprintf("%s %d ", prefix, i)
		if len(line) < size-1 {
			line += strings.Repeat(".", size-1-len(line))
		}
		buf.WriteString(line[:size-1])
		buf.WriteByte('\n')
		n -= size
	}
	return buf.Bytes()
}

func (s *server) touch(c *call, args json.RawMessage) {
	uri := s.resourceURI("counter")
	s.mu.Lock()
	s.counter++
	n := s.counter
	subscribed := s.subscribed[uri]
	s.mu.Unlock()
	if subscribed && c.modern == nil {
		s.send(notification{JSONRPC: "2.0", Method: "notifications/resources/updated",
			Params: map[string]string{"uri": uri}})
	}
	s.notifyListeners("notifications/resources/updated", uri)
	replyText(c, fmt.Sprintf("counter %d", n))
}

// progressParams are the params of notifications/progress.
type progressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      int             `json:"progress"`
	Total         int             `json:"total"`
	Message       string          `json:"message"`
}

func (s *server) progress(c *call, args json.RawMessage) {
	a := struct {
		Steps   int `json:"steps"`
		DelayMS int `json:"delay_ms"`
	}{Steps: 3}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "steps", a.Steps) {
		return
	}
	for i := 1; i <= a.Steps; i++ {
		if i > 1 && !sleepCtx(c.ctx, a.DelayMS) {
			return
		}
		if c.progressToken != nil {
			s.send(notification{JSONRPC: "2.0", Method: "notifications/progress", Params: progressParams{
				ProgressToken: c.progressToken,
				Progress:      i,
				Total:         a.Steps,
				Message:       fmt.Sprintf("step %d of %d", i, a.Steps),
			}})
		}
	}
	replyText(c, fmt.Sprintf("done %d", a.Steps))
}

// logParams are the params of notifications/message.
type logParams struct {
	Level  string `json:"level"`
	Logger string `json:"logger"`
	Data   string `json:"data"`
}

func (s *server) log(c *call, args json.RawMessage) {
	a := struct {
		Level string `json:"level"`
		Data  string `json:"data"`
	}{Level: "info", Data: "hello"}
	if !decodeArgs(c, args, &a) {
		return
	}
	level := slices.Index(logLevels, a.Level)
	if level < 0 {
		c.fail(codeInvalidParams, fmt.Sprintf("invalid arguments: invalid level %q", a.Level))
		return
	}
	if level < s.logThreshold(c) {
		replyText(c, "filtered")
		return
	}
	s.send(notification{JSONRPC: "2.0", Method: "notifications/message",
		Params: logParams{Level: a.Level, Logger: "fake", Data: a.Data}})
	replyText(c, "logged")
}

func (s *server) sample(c *call, args json.RawMessage) {
	a := struct {
		Prompt string `json:"prompt"`
	}{Prompt: "hi"}
	if !decodeArgs(c, args, &a) {
		return
	}
	params := struct {
		Messages  []promptMessage `json:"messages"`
		MaxTokens int             `json:"maxTokens"`
	}{[]promptMessage{{Role: "user", Content: content{Type: "text", Text: a.Prompt}}}, 100}
	result, failure, ok := s.obtain(c, "sampling", "sampling/createMessage", params)
	switch {
	case !ok:
	case failure != "":
		replyToolError(c, "sampling failed: "+failure)
	default:
		var r struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.Unmarshal(result, &r) // keep what could be decoded
		replyText(c, "sampled: "+r.Content.Text)
	}
}

func (s *server) elicit(c *call, args json.RawMessage) {
	a := struct {
		Message string `json:"message"`
	}{Message: "name?"}
	if !decodeArgs(c, args, &a) {
		return
	}
	params := map[string]any{
		"message": a.Message,
		"requestedSchema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"name": map[string]string{"type": "string"}},
		},
	}
	result, failure, ok := s.obtain(c, "elicitation", "elicitation/create", params)
	switch {
	case !ok:
	case failure != "":
		replyToolError(c, "elicitation failed: "+failure)
	default:
		replyText(c, "elicited: "+string(compact(result)))
	}
}

// rootsLater answers at once, then, after delay_ms, asks the client for
// roots/list with no call of the client's in flight (as servers that ask
// for roots at start do), and records what came back as a "roots-later"
// event. The asking ends with the answer, or after clientTimeout.
func (s *server) rootsLater(c *call, args json.RawMessage) {
	var a struct {
		DelayMS *int `json:"delay_ms"`
	}
	if !decodeArgs(c, args, &a) {
		return
	}
	delay := 100 * time.Millisecond
	if a.DelayMS != nil {
		delay = time.Duration(*a.DelayMS) * time.Millisecond
	}
	replyText(c, "asking later")
	go func() {
		time.Sleep(delay)
		s.askRoots("roots-later")
	}()
}

// askRoots asks the client for roots/list outside any call and records
// what came back as an event named name. It blocks until the answer, or
// for at most clientTimeout.
func (s *server) askRoots(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout+time.Second)
	defer cancel()
	result, failure, _ := s.ask(&call{s: s, ctx: ctx}, "roots/list", nil)
	what := "roots: " + string(compact(result))
	if failure != "" {
		what = "roots failed: " + failure
	}
	s.record(event{Event: name, Reason: what})
}

func (s *server) roots(c *call, args json.RawMessage) {
	result, failure, ok := s.obtain(c, "roots", "roots/list", nil)
	switch {
	case !ok:
	case failure != "":
		replyToolError(c, "roots failed: "+failure)
	default:
		var r struct {
			Roots json.RawMessage `json:"roots"`
		}
		json.Unmarshal(result, &r) // keep what could be decoded
		roots := compact(r.Roots)
		if roots == nil {
			roots = json.RawMessage("null")
		}
		replyText(c, "roots: "+string(roots))
	}
}

// metaTool answers the _meta its call came with, as it was sent but
// compacted: what a test asserts a server received (a trace context, the
// keys of a version).
func (s *server) metaTool(c *call, _ json.RawMessage) {
	meta := string(c.meta)
	if meta == "" || meta == "null" {
		meta = "{}"
	}
	replyText(c, meta)
}
