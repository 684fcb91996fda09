package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// subKey names a subscription to a server's resource.
type subKey struct {
	server, uri string // the server's own URI
}

// subscriptions are the sessions subscribed to each server's resources,
// with the URI each used, and what answers resources/subscribe and
// resources/unsubscribe over them. Its function fields are set by
// newSubscriptions and never changed. Its methods are safe for concurrent
// use.
//
// Lock order: mu is a leaf: no other lock is taken while it is held (the
// calls to servers, and the function fields, are made without it).
type subscriptions struct {
	config   func() *Config    // the config in force (requestTimeout)
	backends func() []*backend // the backends in force
	group    *goroutines       // what runs the unsubscriptions of an ended session's resources

	// resolve finds the backend that serves a resource URI as clients see
	// it, and the server's own URI for it, or nil (Gateway.resolveURI); and
	// unknown says a resource is unknown (Gateway.unknown).
	resolve func(ctx context.Context, v *view, uri string) (*backend, string)
	unknown func(v *view, k kind, name string) string
	// viewOf returns the view of a session's principal in the config in
	// force (Gateway.viewOf): a session subscribes only to what it sees.
	viewOf func(who principal) *view

	// subscribeScoped and unsubscribeScoped answer a session's subscription
	// to a resource of a session-scoped server, b, and its unsubscription:
	// the session's own process of b hears of them (scope.go).
	subscribeScoped   func(ctx context.Context, s *session, b *backend, key subKey, uri string, params json.RawMessage) (any, error)
	unsubscribeScoped func(ctx context.Context, s *session, b *backend, key subKey) (any, error)

	mu    sync.Mutex
	byKey map[subKey]map[*session]string
	sent  map[subKey]*mux // the run of its server that was sent the subscription
}

// newSubscriptions returns no subscriptions, answering requests about them
// with the backends and the config in force that backends and config
// return, finding resources with resolve and unknown, passing a
// session-scoped server's to subscribeScoped and unsubscribeScoped, and
// running the unsubscriptions of an ended session's resources on group
// (see the fields of subscriptions).
func newSubscriptions(config func() *Config, backends func() []*backend, group *goroutines,
	resolve func(context.Context, *view, string) (*backend, string), unknown func(*view, kind, string) string, viewOf func(principal) *view,
	subscribeScoped func(context.Context, *session, *backend, subKey, string, json.RawMessage) (any, error),
	unsubscribeScoped func(context.Context, *session, *backend, subKey) (any, error)) *subscriptions {
	return &subscriptions{config: config, backends: backends, group: group,
		resolve: resolve, unknown: unknown, viewOf: viewOf, subscribeScoped: subscribeScoped, unsubscribeScoped: unsubscribeScoped,
		byKey: map[subKey]map[*session]string{}, sent: map[subKey]*mux{}}
}

// sentOn records that run is the run of key's server that is sent the
// subscription, so that run's backendReady does not send it again.
func (t *subscriptions) sentOn(key subKey, run *mux) {
	t.mu.Lock()
	t.sent[key] = run
	t.mu.Unlock()
}

// resend returns the server's own URIs of the resources of server that
// sessions subscribed to and that its run has not been sent yet, sorted,
// and records them as sent on run.
func (t *subscriptions) resend(server string, run *mux) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	uris := []string{}
	for key, subs := range t.byKey {
		if key.server == server && len(subs) > 0 && t.sent[key] != run {
			uris = append(uris, key.uri)
			t.sent[key] = run
		}
	}
	slices.Sort(uris)
	return uris
}

// add subscribes s to key under uri, and reports whether s is the first
// subscriber.
func (t *subscriptions) add(key subKey, s *session, uri string) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := t.byKey[key]
	first = len(subs) == 0
	if subs == nil {
		subs = map[*session]string{}
		t.byKey[key] = subs
	}
	subs[s] = uri
	return first
}

// undo takes back an add whose subscription the server refused. The key
// stays known, with the other subscribers it may have.
func (t *subscriptions) undo(key subKey, s *session) {
	t.mu.Lock()
	delete(t.byKey[key], s)
	if len(t.byKey[key]) == 0 {
		delete(t.sent, key)
	}
	t.mu.Unlock()
}

// drop removes s from the subscribers of key and reports whether it was
// the last.
func (t *subscriptions) drop(key subKey, s *session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	subs := t.byKey[key]
	if _, ok := subs[s]; !ok {
		return false
	}
	delete(subs, s)
	if len(subs) > 0 {
		return false
	}
	delete(t.byKey, key)
	delete(t.sent, key)
	return true
}

// keysOf returns the keys s is subscribed to.
func (t *subscriptions) keysOf(s *session) []subKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keys []subKey
	for key, subs := range t.byKey {
		if _, ok := subs[s]; ok {
			keys = append(keys, key)
		}
	}
	return keys
}

// uris returns the server's own URIs of the resources of server that
// sessions subscribed to, sorted.
func (t *subscriptions) uris(server string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	uris := []string{}
	for key := range t.byKey {
		if key.server == server {
			uris = append(uris, key.uri)
		}
	}
	slices.Sort(uris)
	return uris
}

// subscribers returns a copy of the subscribers of key, with the URI each
// used.
func (t *subscriptions) subscribers(key subKey) map[*session]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.byKey[key])
}

// subscribe answers resources/subscribe. The server hears of the first
// subscriber to a resource only; its updates go to every subscriber.
func (t *subscriptions) subscribe(ctx context.Context, s *session, params json.RawMessage) (any, error) {
	b, key, uri, err := t.subscription(ctx, t.viewOf(s.who), "resources/subscribe", params)
	if err != nil {
		return nil, err
	}
	if !b.capabilities().flag("resources", "subscribe") {
		return nil, &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("server %q, which serves %q, does not offer subscriptions", b.name, uri)}
	}
	if b.scope != nil {
		return t.subscribeScoped(ctx, s, b, key, uri, params)
	}
	if !t.add(key, s, uri) {
		return struct{}{}, nil
	}
	if b.isModern() {
		b.resubscribe()
		return struct{}{}, nil
	}
	// The run that will carry the call, unless it ends first: its
	// backendReady, which may not have run yet, need not send it again.
	t.sentOn(key, b.currentRun())
	ctx, cancel := context.WithTimeout(ctx, t.config().requestTimeout(b.cfg))
	defer cancel()
	if err := b.callInto(ctx, "resources/subscribe", setMember(params, "uri", key.uri)); err != nil {
		t.undo(key, s)
		return nil, err
	}
	return struct{}{}, nil
}

// unsubscribe answers resources/unsubscribe; the server hears of the last
// subscriber's going.
func (t *subscriptions) unsubscribe(ctx context.Context, s *session, params json.RawMessage) (any, error) {
	b, key, _, err := t.subscription(ctx, t.viewOf(s.who), "resources/unsubscribe", params)
	if err != nil {
		return nil, err
	}
	if b.scope != nil {
		return t.unsubscribeScoped(ctx, s, b, key)
	}
	if t.drop(key, s) {
		b.unsubscribe(ctx, key.uri)
	}
	return struct{}{}, nil
}

// subscription finds the backend and key of the URI in a subscription
// request's params.
func (t *subscriptions) subscription(ctx context.Context, v *view, method string, params json.RawMessage) (*backend, subKey, string, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, subKey{}, "", &wireError{Code: codeInvalidParams, Message: method + ": params must hold a uri"}
	}
	b, orig := t.resolve(ctx, v, p.URI)
	if b == nil {
		return nil, subKey{}, "", &wireError{Code: codeResourceNotFound, Message: t.unknown(v, kindResource, p.URI)}
	}
	return b, subKey{b.name, orig}, p.URI, nil
}

// unsubscribeAll ends a session's subscriptions. The servers hear of it
// on goroutines of t.group, so it does not block, unless the group has
// stopped (the gateway has): then the (stopped) servers are told at once.
func (t *subscriptions) unsubscribeAll(s *session) {
	for _, key := range t.keysOf(s) {
		if !t.drop(key, s) {
			continue
		}
		for _, b := range t.backends() {
			if b.name == key.server && b.scope == nil { // a session's own process goes with it
				t.group.goOrRun(func() { b.unsubscribe(context.Background(), key.uri) })
			}
		}
	}
}

// tellUpdated passes server's notifications/resources/updated, params, to
// the sessions subscribed to the resource (to only, if not nil, if it is
// one of them) that still see it, with the URI each of them used. It does
// not block.
func (t *subscriptions) tellUpdated(server string, params json.RawMessage, only *session) {
	var p struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(params, &p)
	for s, uri := range t.subscribers(subKey{server, p.URI}) {
		if only != nil && s != only {
			continue
		}
		if t.viewOf != nil && !t.viewOf(s.who).sees(kindResource, server, p.URI, nil) {
			continue // a reload took the resource out of the session's view
		}
		note, _ := encodeNotification("notifications/resources/updated", setMember(params, "uri", uri))
		s.send(note[:len(note)-1])
	}
}
