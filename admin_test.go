package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const adminToken = "s3cret-admin-token"

// adminConfig returns a config with the admin API on, behind adminToken (in
// a file), with more top-level settings (JSON, each followed by a comma) and
// the servers (a JSON object's members).
func adminConfig(t *testing.T, settings, servers string) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{%s"authTokenFile":%q,"admin":{"registration":true},"mcpServers":{%s}}`, settings, tokenFile, servers)
}

// adminDo sends a request to the admin API under base (the gateway's URL
// without /mcp) with the given headers (name, value, ...) and returns the
// status and the body.
func adminDo(t *testing.T, base, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1] // net/http sends req.Host, not the header
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// admin is adminDo with the bearer token.
func admin(t *testing.T, base, method, path, body string) (int, string) {
	t.Helper()
	return adminDo(t, base, method, path, body, "Authorization", "Bearer "+adminToken)
}

// dynEntry returns the body of a POST that registers fakeserver as name,
// recording in dir, its tools prefixed with prefix, and a secret in its env.
func dynEntry(name, dir, prefix string) string {
	return fmt.Sprintf(`{"name":%q,"command":%q,"args":["-state",%q,"-name",%q,"-prefix",%q],"env":{"API_KEY":"hunter2"}}`,
		name, fakeserverBin, dir, name, prefix)
}

func TestAdminRegistersListsServesAndRemovesAServer(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, adminConfig(t, "", `"file":{"command":"FAKE","args":["-state","STATE","-name","file","-prefix","f_"]}`))
	base := strings.TrimSuffix(tg.url, mcpPath)
	p := newStdioPeer(t, tg.gw, `{}`)

	status, body := admin(t, base, "POST", adminServersPath, dynEntry("dyn", tg.dir, "d_"))
	var added adminServer
	json.Unmarshal([]byte(body), &added)
	if status != http.StatusCreated || added.Name != "dyn" || added.Source != "registered" || added.State != stateReady {
		t.Fatalf("POST = %d %s, want 201 with the server ready", status, body)
	}
	if strings.Contains(body, "hunter2") || !strings.Contains(body, `"API_KEY": "****"`) {
		t.Errorf("POST answered the env unmasked: %s", body)
	}
	if m := p.nextExcept(listChanged[1:]...); m.Method != listChanged[0] {
		t.Errorf("after a registration, the session got %+v, want tools/list_changed", m)
	}
	c := connectWith(t, tg.url, "Bearer "+adminToken)
	if got := toolText(t, c.callTool("1", "d_whoami", `{}`)); !strings.Contains(got, `"name":"dyn"`) {
		t.Errorf("the registered server's whoami = %q", got)
	}

	status, body = admin(t, base, "GET", adminServersPath, "")
	var list struct{ Servers []adminServer }
	json.Unmarshal([]byte(body), &list)
	if status != 200 || len(list.Servers) != 2 || list.Servers[0].Name != "dyn" || list.Servers[0].Source != "registered" ||
		list.Servers[1].Name != "file" || list.Servers[1].Source != "file" || strings.Contains(body, "hunter2") {
		t.Errorf("GET = %d %s, want dyn (registered) and file (file), no secret", status, body)
	}

	dynPID := serversNamed(t, tg.dir, "dyn")[0].PID
	if status, body := admin(t, base, "DELETE", adminServersPath+"/dyn", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s, want 204", status, body)
	}
	if gone, _, _ := procState(dynPID); !gone {
		t.Errorf("the removed server's process %d still runs", dynPID)
	}
	if m := p.nextExcept(listChanged[1:]...); m.Method != listChanged[0] {
		t.Errorf("after a removal, the session got %+v, want tools/list_changed", m)
	}
	if msg := c.callTool("2", "d_whoami", `{}`); msg.Error == nil {
		t.Errorf("the removed server's tool still answers: %+v", msg)
	}
	status, body = admin(t, base, "DELETE", adminServersPath+"/file", "")
	if status != http.StatusConflict || !strings.Contains(body, `server \"file\" comes from the config file`) || !strings.Contains(body, "remove it there and reload") {
		t.Errorf("DELETE of a server of the file = %d %s, want 409 saying to edit the file", status, body)
	}
	if got := toolText(t, c.callTool("3", "f_whoami", `{}`)); !strings.Contains(got, `"name":"file"`) {
		t.Errorf("the file's server after a refused DELETE: %q", got)
	}
	if status, _ := admin(t, base, "DELETE", adminServersPath+"/nope", ""); status != http.StatusNotFound {
		t.Errorf("DELETE of an unknown server = %d, want 404", status)
	}
}

func TestAdminRefusesWhatItMustNot(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, adminConfig(t, `"maxRequestBytes":4096,`, `"file":{"command":"FAKE","args":["-state","STATE","-name","file"],"prefix":"gh"}`))
	base := strings.TrimSuffix(tg.url, mcpPath)
	bad := `{"command":"x","args":"-v","maxInFlight":-1,"prefx":"a"}`
	auth := []string{"Authorization", "Bearer " + adminToken}
	_, fileErr := ParseConfig("config.json", []byte(`{"mcpServers":{"x":`+bad+`}}`), nil, nil)
	tests := []struct {
		name, method, body string
		headers            []string
		status             int
		want               string
	}{
		{"no token", "POST", dynEntry("d1", tg.dir, "d1_"), []string{}, http.StatusUnauthorized, "bearer token"},
		{"a wrong token", "POST", dynEntry("d1", tg.dir, "d1_"), []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized, "bearer token"},
		{"a foreign Origin", "POST", dynEntry("d1", tg.dir, "d1_"), append([]string{"Origin", "https://evil.example"}, auth...), http.StatusForbidden, "Origin"},
		{"a foreign Host", "POST", dynEntry("d1", tg.dir, "d1_"), append([]string{"Host", "evil.example"}, auth...), http.StatusForbidden, "Host"},
		{"a body over maxRequestBytes", "POST", `{"name":"big","command":"` + strings.Repeat("x", 5000) + `"}`, nil, http.StatusRequestEntityTooLarge, "maxRequestBytes"},
		{"not an object", "POST", `[1]`, nil, http.StatusBadRequest, `a server entry, as in mcpServers, with its \"name\"`},
		{"no name", "POST", `{"command":"x"}`, nil, http.StatusBadRequest, `\"name\": required`},
		{"an invalid entry", "POST", `{"name":"x",` + bad[1:], nil, http.StatusBadRequest,
			strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(fileErr.Error(), "config.json: ", "POST /admin/servers: "), `"`, `\"`), "\n", `\n`)},
		{"an invalid name", "POST", `{"name":"a b","command":"x"}`, nil, http.StatusBadRequest, "invalid server name"},
		{"a name of the file", "POST", dynEntry("file", tg.dir, "f_"), nil, http.StatusConflict, `server \"file\" is in the config file`},
		{"the prefix of the file's server", "POST", strings.Replace(dynEntry("d2", tg.dir, "d2_"), `{`, `{"prefix":"gh",`, 1), nil, http.StatusConflict,
			`prefix \"gh\" is server \"file\"'s; a prefix's names belong to one server alone: choose another prefix`},
		{"a name over 64 bytes", "POST", `{"name":"` + strings.Repeat("n", 65) + `","command":"x"}`, nil, http.StatusBadRequest, "is 65 bytes long, over the limit of 64"},
		{"GET on a server", "GET", "", nil, http.StatusMethodNotAllowed, "DELETE removes a registered server"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := adminServersPath
			if tc.name == "GET on a server" {
				path += "/file"
			}
			headers := tc.headers
			if headers == nil {
				headers = auth
			}
			status, body := adminDo(t, base, tc.method, path, tc.body, headers...)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("%s %s = %d %s, want %d saying %s", tc.method, path, status, body, tc.status, tc.want)
			}
		})
	}
	if names := tg.gw.registrar.servers(); len(names) != 1 {
		t.Errorf("after the refusals, the servers are %+v, want the file's only", names)
	}
}

func TestAdminRegistersNoMoreThanMaxDynamic(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, strings.Replace(adminConfig(t, "", `"file":{"command":"FAKE","args":["-state","STATE","-name","file"]}`),
		`"registration":true`, `"registration":true,"maxDynamic":1`, 1))
	base := strings.TrimSuffix(tg.url, mcpPath)
	if status, body := admin(t, base, "POST", adminServersPath, dynEntry("one", tg.dir, "one_")); status != http.StatusCreated {
		t.Fatalf("the first registration = %d %s", status, body)
	}
	if status, body := admin(t, base, "POST", adminServersPath, dynEntry("one", tg.dir, "one_")); status != http.StatusConflict || !strings.Contains(body, "already registered") {
		t.Errorf("a second registration of a name = %d %s, want 409", status, body)
	}
	status, body := admin(t, base, "POST", adminServersPath, dynEntry("two", tg.dir, "two_"))
	if status != http.StatusTooManyRequests || !strings.Contains(body, "admin.maxDynamic") {
		t.Errorf("a registration past maxDynamic = %d %s, want 429 naming admin.maxDynamic", status, body)
	}
	if n := len(serversNamed(t, tg.dir, "two")); n != 0 {
		t.Errorf("the server refused was started %d times", n)
	}
}

func TestAdminIsOffUnlessConfiguredAndNeedsAToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{`{"admin":{"registration":true},"mcpServers":{"a":{"command":"x"}}}`, `config.json: admin.registration: needs a bearer token`},
		{`{"admin":{"registraton":true},"mcpServers":{"a":{"command":"x"}}}`, `config.json: admin: unknown field "registraton"; did you mean "registration"?`},
		{`{"admin":{"maxDynamic":"5"},"mcpServers":{"a":{"command":"x"}}}`, `config.json: admin: maxDynamic: want an integer, got string`},
		{`{"admin":{"maxDynamic":-1},"mcpServers":{"a":{"command":"x"}}}`, `config.json: admin.maxDynamic: must not be negative`},
	} {
		if _, err := ParseConfig("config.json", []byte(tc.src), nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) = %v, want %q", tc.src, err, tc.want)
		}
	}
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`)
	status, body := adminDo(t, strings.TrimSuffix(tg.url, mcpPath), "POST", adminServersPath, dynEntry("d", tg.dir, "d_"))
	if status != http.StatusNotFound || !strings.Contains(body, "admin API is off") {
		t.Errorf("POST with registration off = %d %s, want 404", status, body)
	}
}

func TestAdminRegisteredServersSurviveSIGHUPAndYieldToTheFile(t *testing.T) {
	t.Parallel()
	c := startCorral(t, adminConfig(t, `"listen":"127.0.0.1:0",`, `"a":{"command":"FAKE","args":["-state","STATE","-name","a","-prefix","a_"]}`))
	c.waitHTTP(1)
	base := strings.TrimSuffix(c.url, mcpPath)
	if status, body := admin(t, base, "POST", adminServersPath, dynEntry("dyn", c.dir, "d_")); status != http.StatusCreated {
		t.Fatalf("POST = %d %s", status, body)
	}
	c.waitLog(`level=INFO msg=audit action=register remote=127\.0\.0\.1:\d+ server=dyn command=` + fakeserverBin + `$`)
	cl := connectWith(t, c.url, "Bearer "+adminToken)
	dynPID := serversNamed(t, c.dir, "dyn")[0].PID

	path := c.cmd.Args[2]
	cfg, _ := os.ReadFile(path)
	added := strings.Replace(string(cfg), `"mcpServers":{`, `"mcpServers":{"b":{"command":"`+fakeserverBin+`","args":["-state","`+c.dir+`","-name","b","-prefix","b_"]},`, 1)
	os.WriteFile(path, []byte(added), 0o600)
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.waitLog(`msg=reloaded added=\[b\] removed=\[\] changed=\[\] kept="\[a dyn\]"`)
	if got := toolText(t, cl.callTool("1", "d_whoami", `{}`)); !strings.Contains(got, fmt.Sprintf(`"pid":%d`, dynPID)) {
		t.Errorf("after a reload the registered server answered %q, want the same process %d", got, dynPID)
	}

	// The file now names a server dyn: the file's entry wins.
	withDyn := strings.Replace(added, `"mcpServers":{`, `"mcpServers":{"dyn":{"command":"`+fakeserverBin+`","args":["-state","`+c.dir+`","-name","dyn","-prefix","filedyn_"]},`, 1)
	os.WriteFile(path, []byte(withDyn), 0o600)
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.waitLog(`level=WARN msg=audit action=unregister by=reload server=dyn why="the config file now has a server of this name`)
	c.waitLog(`msg=reloaded .*changed=\[dyn\]`)
	waitFor(t, 10*time.Second, "the file's dyn to serve", func() bool {
		return cl.callTool("2", "filedyn_whoami", `{}`).Error == nil
	})
	_, body := admin(t, base, "GET", adminServersPath, "")
	if !strings.Contains(body, `"name": "dyn",
      "source": "file"`) {
		t.Errorf("GET after the file took dyn over: %s", body)
	}
	if status, _ := admin(t, base, "DELETE", adminServersPath+"/dyn", ""); status != http.StatusConflict {
		t.Errorf("DELETE of dyn, now the file's = %d, want 409", status)
	}
}

func TestAdminRegisteredServersGoWhenAReloadTurnsRegistrationOff(t *testing.T) {
	t.Parallel()
	src := adminConfig(t, "", `"file":{"command":"FAKE","args":["-state","STATE","-name","file"]}`)
	tg := startGateway(t, src)
	base := strings.TrimSuffix(tg.url, mcpPath)
	if status, body := admin(t, base, "POST", adminServersPath, dynEntry("dyn", tg.dir, "d_")); status != http.StatusCreated {
		t.Fatalf("POST = %d %s", status, body)
	}
	dynPID := serversNamed(t, tg.dir, "dyn")[0].PID
	parse := func(src string) *Config {
		cfg, err := ParseConfig("config.json", []byte(strings.ReplaceAll(strings.ReplaceAll(src, "STATE", tg.dir), "FAKE", fakeserverBin)), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if r := tg.gw.Reload(parse(src)); fmt.Sprint(r.Kept) != "[dyn file]" || !tg.gw.registrar.registered.has("dyn") {
		t.Errorf("a reload of the same file kept %v, want [dyn file], dyn still registered", r.Kept)
	}
	off := strings.Replace(src, `"admin":{"registration":true},`, ``, 1)
	if r := tg.gw.Reload(parse(off)); fmt.Sprint(r.Removed) != "[dyn]" {
		t.Errorf("a reload that turns registration off removed %v, want [dyn]", r.Removed)
	}
	if gone, _, _ := procState(dynPID); !gone {
		t.Errorf("the registered server %d still runs after registration was turned off", dynPID)
	}
	if status, _ := admin(t, base, "GET", adminServersPath, ""); status != http.StatusNotFound {
		t.Errorf("GET with registration off = %d, want 404", status)
	}
}

func TestAdminRegisteredServerYieldsItsPrefixToTheFile(t *testing.T) {
	t.Parallel()
	src := adminConfig(t, "", `"file":{"command":"FAKE","args":["-state","STATE","-name","file"]}`)
	tg := startGateway(t, src)
	base := strings.TrimSuffix(tg.url, mcpPath)
	if status, body := admin(t, base, "POST", adminServersPath, strings.Replace(dynEntry("dyn", tg.dir, "d_"), `{`, `{"prefix":"gh",`, 1)); status != http.StatusCreated {
		t.Fatalf("POST = %d %s", status, body)
	}
	dynPID := serversNamed(t, tg.dir, "dyn")[0].PID
	withPrefix := strings.Replace(src, `"-name","file"]`, `"-name","file"],"prefix":"gh"`, 1)
	cfg, err := ParseConfig("config.json", []byte(strings.ReplaceAll(strings.ReplaceAll(withPrefix, "STATE", tg.dir), "FAKE", fakeserverBin)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := tg.gw.Reload(cfg); fmt.Sprint(r.Removed) != "[dyn]" || tg.gw.registrar.registered.has("dyn") {
		t.Errorf("a reload that gives the file's server the registered one's prefix removed %v, want [dyn], forgotten", r.Removed)
	}
	if gone, _, _ := procState(dynPID); !gone {
		t.Errorf("the registered server %d still runs after the file took its prefix", dynPID)
	}
	c := connectWith(t, tg.url, "Bearer "+adminToken)
	if got := toolText(t, c.callTool("1", "gh__whoami", `{}`)); !strings.Contains(got, `"name":"file"`) {
		t.Errorf("gh__whoami after the reload = %q, want the file's server", got)
	}
}

func TestRegistrationOfAHugeNameIsRefusedBriefly(t *testing.T) {
	// A name of a million bytes could never start (the marker variable is
	// over the kernel's bound), and its DELETE would be over the header
	// limit: the parser refuses it, and the error does not repeat it.
	body := `{"name":"` + strings.Repeat("n", 1_000_000) + `","command":"x"}`
	s, err := parseRegistration(&Config{file: "config.json"}, []byte(body))
	if s != nil || err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "is 1000000 bytes long, over the limit of 64") {
		t.Errorf("parseRegistration(a name of 1,000,000 bytes) = %v, an error of %d bytes: %.300v; want a short error naming the limit", s, len(fmt.Sprint(err)), err)
	}
}
