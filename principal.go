package main

// This file holds who sends a request and what they may see. Every request
// carries its principal: the front end that takes the request in sets it,
// once, on the session the request comes in (sessionSet.newSession,
// sessionSet.detachedSession), and the route reads the principal's view
// (Gateway.serve): lists are built per view (catalog.listsFor), and a name
// outside the view is answered as an unknown one and never reaches a server
// (Gateway.itemByName, Gateway.itemByURI). Letting one client see less is a
// change to the view a front end gives its principal, and nowhere else.

// principal is who sent a request, as the front end that took it in knows.
// Today there are three: the -stdio client (the local user who runs corral),
// anyone who reaches the HTTP endpoint when no bearer token is configured,
// and the holder of the one bearer token. Its zero value is an anonymous
// principal who sees everything.
type principal struct {
	// name names the principal in logs: "stdio", "anonymous" or "bearer
	// token".
	name string
	// view is what the principal may see; nil sees every server's items.
	view *view
}

// The principals of today's front ends: values, never changed.
var (
	stdioPrincipal     = principal{name: "stdio"}
	anonymousPrincipal = principal{name: "anonymous"}
	tokenPrincipal     = principal{name: "bearer token"}
)

// view is which items of the catalog a principal sees. A nil *view sees
// every item. A view is never changed once made: the catalog keeps the
// lists it built for it (catalog.listsFor) for as long as it is in force.
type view struct {
	// name names the view in logs and errors.
	name string
	// allows reports whether the item of kind k that server offers, named
	// name as clients see it, is in the view. It must be safe for concurrent
	// use and give the same answer each time.
	allows func(k kind, server, name string) bool
}

// sees reports whether the item of kind k that server offers, which
// clients call name, is in the view. Every item is in a nil view.
func (v *view) sees(k kind, server, name string) bool {
	return v == nil || v.allows(k, server, name)
}
