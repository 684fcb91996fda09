package main

// This file holds the admin API over HTTP: /admin/servers and /admin/pins,
// behind the same Origin and Host checks, bearer token and body limit as
// /mcp (ServeHTTP applies them before it gets here). Every change it makes
// is logged as an audit line: who (the remote address), what (the server's
// name, and its command or url as -check shows them, or the tool whose
// changed definition was accepted), never a secret value.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// isAdminPath reports whether path is the admin API's.
func isAdminPath(path string) bool {
	return underPath(path, adminServersPath) || underPath(path, adminPinsPath)
}

// underPath reports whether path is base or below it.
func underPath(path, base string) bool {
	return path == base || strings.HasPrefix(path, base+"/")
}

// serveAdmin serves the admin API. /admin/servers: GET lists every server,
// POST registers one, DELETE /admin/servers/NAME removes a registered one;
// with registration off, every path of it is not found. /admin/pins (see
// servePins) is served whenever a server has "pin" set, registration or
// not: accepting a changed tool definition starts nothing. Either needs
// the bearer token (authTokenFile's or authTokenEnv's); a named client's
// or an OAuth caller's gets 403.
func (h *httpFrontEnd) serveAdmin(w http.ResponseWriter, r *http.Request) {
	cfg := h.gw.config()
	pins := underPath(r.URL.Path, adminPinsPath)
	switch {
	case pins && (cfg.token == "" || !anyPinned(cfg)):
		writeAdmin(w, http.StatusNotFound, map[string]string{"error": adminPinsPath + ` is off: it is served when a server sets "pin" and the config has a bearer token (authTokenFile or authTokenEnv); without them, accept a changed definition with -accept-pins SERVER/TOOL at start`})
		return
	case !pins && (!cfg.Admin.Registration || cfg.token == ""):
		writeAdmin(w, http.StatusNotFound, map[string]string{"error": `the admin API is off; set "admin": {"registration": true} in the config, with a bearer token`})
		return
	}
	if who, _ := h.authenticate(r); who != tokenPrincipal {
		writeAdmin(w, http.StatusForbidden, map[string]string{"error": "the admin API needs authTokenFile's token; a named client's token does not reach it"})
		return
	}
	if pins {
		h.servePins(w, r)
		return
	}
	name, one := strings.CutPrefix(r.URL.Path, adminServersPath+"/")
	switch {
	case !one && r.Method == http.MethodGet:
		writeAdmin(w, http.StatusOK, map[string]any{"servers": h.gw.registrar.servers()})
	case !one && r.Method == http.MethodPost:
		h.serveRegister(w, r)
	case one && r.Method == http.MethodDelete:
		h.serveUnregister(w, r, name)
	case one:
		w.Header().Set("Allow", "DELETE")
		writeAdmin(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " is not supported on " + r.URL.Path + "; DELETE removes a registered server"})
	default:
		w.Header().Set("Allow", "GET, POST")
		writeAdmin(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " is not supported on " + adminServersPath + "; GET lists the servers, POST registers one"})
	}
}

// serveRegister registers the server entry the request holds, waits for
// its first start (at most twice startTimeout: its prerequisite, then its
// handshake), and answers 201 with it as GET lists it.
func (h *httpFrontEnd) serveRegister(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	cfg := h.gw.config()
	s, err := parseRegistration(cfg, body)
	if err != nil {
		var named struct {
			Name string `json:"name"`
		}
		json.Unmarshal(body, &named) // for the audit line, if the body names a server at all
		h.audit(r, "register refused", named.Name, nil, err.Error())
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	b, err := h.gw.registrar.register(s)
	var ae *adminError
	switch {
	case errors.As(err, &ae):
		h.audit(r, "register refused", s.Name(), s, ae.msg)
		writeAdmin(w, ae.status, map[string]string{"error": ae.msg})
		return
	case err != nil:
		writeAdmin(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	h.audit(r, "register", s.Name(), s, "")
	ctx, cancel := context.WithTimeout(r.Context(), 2*cfg.StartTimeout.D()+time.Second)
	defer cancel()
	select {
	case <-b.firstDone:
	case <-ctx.Done():
	}
	for _, a := range h.gw.registrar.servers() {
		if a.Name == s.Name() {
			writeAdmin(w, http.StatusCreated, a)
			return
		}
	}
	writeAdmin(w, http.StatusCreated, adminServer{Name: s.Name(), Source: "registered", State: stateStopped})
}

// serveUnregister removes the registered server name, stopped with the stop
// ladder, and answers 204.
func (h *httpFrontEnd) serveUnregister(w http.ResponseWriter, r *http.Request, name string) {
	var ae *adminError
	switch err := h.gw.registrar.unregister(name); {
	case errors.As(err, &ae):
		h.audit(r, "unregister refused", name, nil, ae.msg)
		writeAdmin(w, ae.status, map[string]string{"error": ae.msg})
	case err != nil:
		writeAdmin(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		h.audit(r, "unregister", name, nil, "")
		w.WriteHeader(http.StatusNoContent)
	}
}

// servePins serves /admin/pins: GET lists the changed tool definitions
// pending, as the status page shows them, with both definitions whole;
// POST /admin/pins/accept accepts some (serveAcceptPins).
func (h *httpFrontEnd) servePins(w http.ResponseWriter, r *http.Request) {
	accept := adminPinsPath + "/accept"
	switch {
	case r.URL.Path == adminPinsPath && r.Method == http.MethodGet:
		changes := h.gw.pins.changed()
		if changes == nil {
			changes = []pinChange{}
		}
		writeAdmin(w, http.StatusOK, map[string]any{"changes": changes})
	case r.URL.Path == accept && r.Method == http.MethodPost:
		h.serveAcceptPins(w, r)
	case r.URL.Path == adminPinsPath:
		w.Header().Set("Allow", "GET")
		writeAdmin(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " is not supported on " + adminPinsPath + "; GET lists the changed tool definitions, POST " + accept + " accepts them"})
	case r.URL.Path == accept:
		w.Header().Set("Allow", "POST")
		writeAdmin(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " is not supported on " + accept + `; POST {"tools": ["SERVER/TOOL"]} accepts changed tool definitions`})
	default:
		writeAdmin(w, http.StatusNotFound, map[string]string{"error": "no such path; GET " + adminPinsPath + " lists the changed tool definitions, POST " + accept + " accepts them"})
	}
}

// serveAcceptPins accepts the changed tool definitions the request names,
// {"tools": ["SERVER/TOOL", "SERVER", "SERVER/TOOL@sha256:HEX"]}, all or
// none (pinStore.acceptPending), and rebuilds the catalog, so that a
// withheld tool is listed again at once and sessions hear list_changed. It
// answers 200 with the changes accepted, each an audit line.
func (h *httpFrontEnd) serveAcceptPins(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		Tools []string `json:"tools"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		why := `want {"tools": ["SERVER/TOOL", ...]}, each "SERVER/TOOL", "SERVER" (every change of it) or "SERVER/TOOL@sha256:HEX" as GET ` + adminPinsPath + " lists them: " + err.Error()
		h.auditLine(r, "accept pin refused", "", "", nil, why)
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": why})
		return
	}
	accepted, err := h.gw.pins.acceptPending(h.gw.config(), req.Tools)
	var ae *adminError
	if errors.As(err, &ae) {
		asked := strings.Join(req.Tools, " ")
		if len(asked) > 256 {
			asked = asked[:256] + "..."
		}
		h.auditLine(r, "accept pin refused", "", asked, []any{"tools", asked}, ae.msg)
		writeAdmin(w, ae.status, map[string]string{"error": ae.msg})
		return
	}
	for _, c := range accepted {
		h.auditLine(r, "accept pin", c.Server, c.Tool+"@"+c.Digest, []any{"tool", c.Tool, "digest", c.Digest, "pin", c.Mode, "diff", strings.Join(c.Diff, "; ")}, "")
	}
	h.gw.rebuildCatalog() // check finds the new pins: a withheld tool is served again
	if err != nil {
		writeAdmin(w, http.StatusInternalServerError, map[string]any{"error": err.Error(), "accepted": accepted})
		return
	}
	writeAdmin(w, http.StatusOK, map[string]any{"accepted": accepted})
}

// audit logs a change, or a refused one (with why), made through the
// admin API: who asked, and what, naming the server by its name and its
// command or url as -check shows them, never a secret.
func (h *httpFrontEnd) audit(r *http.Request, action, name string, s *ServerConfig, why string) {
	var args []any
	what := ""
	switch {
	case s == nil:
	case s.URL != "":
		what = maskURL(cmp.Or(s.shown["url"], s.URL))
		args = append(args, "url", what)
	default:
		what = cmp.Or(s.shown["command"], s.Command)
		args = append(args, "command", what)
	}
	h.auditLine(r, action, name, what, args, why)
}

// auditLine logs an admin action, or a refused one (with why), and writes
// it to the audit trail: detail is the trail's, args what the log line
// says after the server.
func (h *httpFrontEnd) auditLine(r *http.Request, action, server, detail string, args []any, why string) {
	args = append([]any{"action", action, "remote", r.RemoteAddr, "server", server}, args...)
	h.gw.audit.auditAdmin(h.principalOf(r).name, r.RemoteAddr, action, server, detail, why)
	if why != "" {
		h.gw.log.Warn("audit", append(args, "why", why)...)
		return
	}
	h.gw.log.Info("audit", args...)
}

// writeAdmin answers with status and v as indented JSON.
func writeAdmin(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
