package main

import (
	"encoding/json"
	"slices"
)

// This file holds who sends a request and what they may see. Every request
// carries its principal: the front end that takes the request in sets it,
// once, on the session the request comes in (sessionSet.newSession,
// sessionSet.detachedSession), and the route reads the principal's view
// (Gateway.serve): lists are built per view (catalog.listsFor), and a name
// outside the view is answered as an unknown one and never reaches a server
// (Gateway.itemByName, Gateway.itemByURI). Letting one client see less is a
// change to the view a front end gives its principal, and nowhere else.
//
// A named client's view is its profile's, in the config in force: the
// principal names the client, and Gateway.viewOf finds its view at each
// request (access.viewOf), so that a reload that changes the client's
// profile changes what its open sessions see, and a client removed by a
// reload sees nothing.

// principal is who sent a request, as the front end that took it in knows:
// the -stdio client (the local user who runs corral), anyone who reaches
// the HTTP endpoint when no bearer token is configured, the holder of the
// one bearer token of authTokenFile, or a named client (clients.go). Its
// zero value is an anonymous principal who sees everything. It is a value,
// compared with ==: the HTTP front ends serve a session only to the
// principal that opened it.
type principal struct {
	// name names the principal in logs: "stdio", "anonymous", "bearer
	// token", or a named client's name.
	name string
	// client is the named client (a key of Config.Clients), or "".
	client string
	// subject is the sub claim of an OAuth caller's token (http.go,
	// oauthPrincipal), or "": two callers mapped to one client do not
	// share sessions.
	subject string
	// oauth says the caller's token is an authorization server's: the
	// pages about every server (/metrics, /healthz, the status page) and
	// the admin API keep to static tokens.
	oauth bool
	// profile is the profile served without a token (/mcp/NAME, -stdio
	// -profile NAME), or "".
	profile string
	// view, if not nil, is the view of a principal that names no client
	// and no profile (a test's); else access.viewOf finds it.
	view *view
}

// The principals of today's front ends: values, never changed.
var (
	stdioPrincipal     = principal{name: "stdio"}
	anonymousPrincipal = principal{name: "anonymous"}
	tokenPrincipal     = principal{name: "bearer token"}
)

// clientPrincipal returns the principal of named client name.
func clientPrincipal(name string) principal {
	return principal{name: name, client: name}
}

// profilePrincipal returns who, served profile name without a token.
func profilePrincipal(who principal, name string) principal {
	who.profile = name
	return who
}

// view is which items of the catalog a principal sees. A nil *view sees
// every item. A view is never changed once made: the catalog keeps the
// lists it built for it (catalog.listsFor) for as long as it is in force.
type view struct {
	// name names the view in logs and errors.
	name string
	// allows reports whether the item of kind k that server offers, named
	// name by the server (before any prefix), is in the view; item is the
	// item's object as the server sent it, or nil for a resource known by
	// its URI alone (one a template matches). It must be safe for
	// concurrent use and give the same answer each time.
	allows func(k kind, server, name string, item json.RawMessage) bool
	// server reports whether any item of server may be in the view: what
	// the view says of servers (their instructions, their log messages,
	// whether they are ready). If nil, every server may be.
	server func(server string) bool
}

// sees reports whether the item of kind k that server offers, which the
// server calls name, is in the view. Every item is in a nil view.
func (v *view) sees(k kind, server, name string, item json.RawMessage) bool {
	return v == nil || v.allows(k, server, name, item)
}

// seesServer reports whether items of server may be in the view.
func (v *view) seesServer(server string) bool {
	return v == nil || v.server == nil || v.server(server)
}

// access is the views of one config's clients and profiles, made when the
// config comes into force and never changed: a reload makes a new one.
type access struct {
	profiles map[string]*view // by profile name
	clients  map[string]*view // by client name: its profile's view, or nil for none
	none     *view            // the view of a client or profile that is gone: nothing
}

// newAccess returns the views of cfg's clients and profiles.
func newAccess(cfg *Config) *access {
	a := &access{profiles: map[string]*view{}, clients: map[string]*view{},
		none: &view{name: "nothing", allows: func(kind, string, string, json.RawMessage) bool { return false }, server: func(string) bool { return false }}}
	for name, p := range cfg.Profiles {
		if p != nil {
			a.profiles[name] = profileView(name, p)
		}
	}
	for name, c := range cfg.Clients {
		if c == nil {
			continue
		}
		a.clients[name] = nil
		if c.Profile != "" {
			a.clients[name] = a.profiles[c.Profile]
			if a.clients[name] == nil {
				a.clients[name] = a.none
			}
		}
	}
	return a
}

// viewOf returns the view of who: its client's profile's, the profile it
// was served, or its own. A client or profile the config does not have
// (any more) sees nothing.
func (a *access) viewOf(who principal) *view {
	switch {
	case a == nil: // a gateway made by a test without a config's access
		return who.view
	case who.client != "":
		v, ok := a.clients[who.client]
		if !ok {
			return a.none
		}
		return v
	case who.profile != "":
		if v := a.profiles[who.profile]; v != nil {
			return v
		}
		return a.none
	}
	return who.view
}

// knows reports whether who's client, if it names one, is in the config.
func (a *access) knows(who principal) bool {
	_, ok := a.clients[who.client]
	return who.client == "" || ok
}

// profileView returns the view of profile p, named name.
func profileView(name string, p *ProfileConfig) *view {
	return &view{
		name:   "profile " + quoteName(name),
		server: p.showsServer,
		allows: func(k kind, server, name string, item json.RawMessage) bool {
			return p.shows(kinds[k].field, server, name, func() bool { return readOnlyHint(item) })
		},
	}
}

// readOnlyHint reports whether a tool's object says, in its annotations,
// readOnlyHint: true.
func readOnlyHint(item json.RawMessage) bool {
	var t struct {
		Annotations struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	}
	return item != nil && json.Unmarshal(item, &t) == nil && t.Annotations.ReadOnlyHint
}

// profileNames returns the names of cfg's profiles, sorted, for messages.
func profileNames(cfg *Config) []string {
	var names []string
	for name := range cfg.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
