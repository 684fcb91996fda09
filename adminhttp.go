package main

// This file holds the admin API over HTTP: /admin/servers, behind the same
// Origin and Host checks, bearer token and body limit as /mcp (ServeHTTP
// applies them before it gets here). Every change it makes is logged as an
// audit line: who (the remote address), what (the server's name, and its
// command or url as -check shows them), never a secret value.

import (
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
	return path == adminServersPath || strings.HasPrefix(path, adminServersPath+"/")
}

// serveAdmin serves /admin/servers: GET lists every server, POST registers
// one, DELETE /admin/servers/NAME removes a registered one. With
// registration off, every path of it is not found.
func (h *httpFrontEnd) serveAdmin(w http.ResponseWriter, r *http.Request) {
	cfg := h.gw.config()
	if !cfg.Admin.Registration || cfg.token == "" {
		writeAdmin(w, http.StatusNotFound, map[string]string{"error": `the admin API is off; set "admin": {"registration": true} in the config, with a bearer token`})
		return
	}
	if who, _ := h.authenticate(r); who != tokenPrincipal {
		writeAdmin(w, http.StatusForbidden, map[string]string{"error": "the admin API needs authTokenFile's token; a named client's token does not reach it"})
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

// audit logs a change, or a refused one (with why), made through the
// admin API: who asked, and what, naming the server by its name and its
// command or url as -check shows them, never a secret.
func (h *httpFrontEnd) audit(r *http.Request, action, name string, s *ServerConfig, why string) {
	args := []any{"action", action, "remote", r.RemoteAddr, "server", name}
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
	h.gw.audit.auditAdmin(h.principalOf(r).name, r.RemoteAddr, action, name, what, why)
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
