package main

// This file holds corral as an OAuth 2.1 resource server (the MCP
// authorization specification, 2025-11-25 and 2026-07-28): the validator
// of an authorization server's access tokens, its key set found through
// the server's metadata (RFC 8414, or OpenID Connect discovery), fetched
// with a timeout and a size bound, cached, fetched again on an unknown key
// at most once per interval and kept when the server cannot be reached;
// opaque tokens introspected (RFC 7662) with a bounded cache; corral's own
// Protected Resource Metadata (RFC 9728); and the challenges of a 401 and
// a 403 (RFC 6750, section 3). A token is only ever read here: it is never
// passed to a server.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The bounds of what corral reads from an authorization server.
const (
	// maxASMetadataBytes bounds the server's metadata document.
	maxASMetadataBytes = 256 << 10
	// maxIntrospectionBytes bounds an introspection answer.
	maxIntrospectionBytes = 64 << 10
	// maxVerifiedTokens bounds the tokens whose checks are remembered, so
	// that the requests of one session cost one signature check.
	maxVerifiedTokens = 4096
)

// An authError is why a request's token is refused: a 401 (invalid_token,
// or no token) or a 403 (insufficient_scope, or a token no client is
// mapped to), with what the challenge and the answer say.
type authError struct {
	status int    // http.StatusUnauthorized or http.StatusForbidden
	code   string // RFC 6750's error code; "" for a request without a token
	msg    string // for the client and the log: why
}

func (e *authError) Error() string { return e.msg }

// tokenInfo is what a valid token says of its caller.
type tokenInfo struct {
	sub, clientID  string
	scopes, groups []string
	exp            time.Time // zero if the token does not say
}

// A tokenValidator checks the access tokens of one "oauth" config. Its
// methods are safe for concurrent use.
type tokenValidator struct {
	cfg    *OAuthConfig
	client *http.Client
	log    *slog.Logger
	now    func() time.Time

	verified   *tokenCache // JWTs that passed every check
	introspect *tokenCache // introspection answers, active or not

	fetchMu sync.Mutex // held by one fetch of the metadata and key set at a time

	mu      sync.Mutex
	meta    *asMetadata // nil until fetched
	keys    []*jwk      // nil until fetched
	fetched time.Time   // when keys were fetched
	tried   time.Time   // when a fetch was last begun
	fetches int         // fetches begun, for tests
}

// asMetadata is what corral reads of an authorization server's metadata.
type asMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// newTokenValidator returns the validator of o's tokens. It fetches
// nothing until the first token comes.
func newTokenValidator(o *OAuthConfig, log *slog.Logger) *tokenValidator {
	max := defaultIntrospectMax
	if o.Introspection != nil && o.Introspection.MaxCached > 0 {
		max = o.Introspection.MaxCached
	}
	client := &http.Client{Timeout: o.fetchTimeout(), CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || !secureURL(req.URL) {
			return fmt.Errorf("refusing a redirect to %s: at most 5, each https (or http on loopback)", redactedURL(req.URL))
		}
		return nil
	}}
	return &tokenValidator{cfg: o, log: log, now: time.Now,
		client:     client,
		verified:   newTokenCache(maxVerifiedTokens),
		introspect: newTokenCache(max)}
}

// validate checks token and returns what it says of its caller, or why it
// is refused (a 401 *authError). A JWT is checked against the issuer's
// keys; any other token is introspected, where introspection is
// configured. It blocks while the key set or an introspection is fetched,
// at most the config's fetchTimeout.
func (v *tokenValidator) validate(ctx context.Context, token string) (*tokenInfo, error) {
	if len(token) > maxTokenBytes {
		return nil, invalidToken("the token is %d bytes, more than %d", len(token), maxTokenBytes)
	}
	sum := sha256.Sum256([]byte(token))
	now := v.now()
	if info, err, ok := v.verified.get(sum, now); ok {
		return info, err
	}
	if !looksLikeJWT(token) {
		if v.cfg.Introspection == nil {
			return nil, invalidToken("the token is not a JWT, and corral introspects no opaque token (oauth.introspection)")
		}
		return v.introspected(ctx, token, sum)
	}
	info, err := v.checkJWT(ctx, token, now)
	if err != nil {
		return nil, invalidToken("%v", err)
	}
	v.verified.put(sum, info, nil, info.exp.Add(v.cfg.leeway()), now)
	return info, nil
}

// invalidToken returns a 401 invalid_token error.
func invalidToken(format string, args ...any) *authError {
	return &authError{status: http.StatusUnauthorized, code: "invalid_token", msg: fmt.Sprintf(format, args...)}
}

// checkJWT verifies token's signature with a key of the issuer's set, then
// its claims.
func (v *tokenValidator) checkJWT(ctx context.Context, token string, now time.Time) (*tokenInfo, error) {
	t, err := parseJWS(token)
	if err != nil {
		return nil, err
	}
	keys, err := v.keysFor(ctx, t)
	if err != nil {
		return nil, err
	}
	err = errors.New("no key verifies the token's signature")
	for _, k := range keys {
		if err = t.verify(k); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	c, err := parseClaims(t.payload, v.cfg.groupsClaim())
	if err != nil {
		return nil, err
	}
	if err := c.check(v.cfg.Issuer, v.cfg.audience(), now, v.cfg.leeway()); err != nil {
		return nil, err
	}
	return &tokenInfo{sub: c.sub, clientID: c.clientID, scopes: c.scopes, groups: c.groups, exp: c.exp}, nil
}

// keysFor returns the keys of the issuer's set that may have signed t,
// fetching the set first when corral has none, when it is older than
// jwksMaxAge, or when t names a key it does not have; but never more often
// than once per jwksRefreshInterval, so that tokens naming made-up keys
// cannot make corral fetch at their rate. A set that cannot be fetched
// again is kept.
func (v *tokenValidator) keysFor(ctx context.Context, t *jws) ([]*jwk, error) {
	v.mu.Lock()
	keys, fetched, tried := v.keys, v.fetched, v.tried
	v.mu.Unlock()
	now := v.now()
	match := keysFor(keys, t)
	fresh := keys != nil && now.Sub(fetched) < v.cfg.jwksMaxAge()
	if len(match) > 0 && fresh {
		return match, nil
	}
	if tried.IsZero() || now.Sub(tried) >= v.cfg.jwksRefresh() {
		v.refresh(ctx, tried)
		v.mu.Lock()
		keys = v.keys
		v.mu.Unlock()
		match = keysFor(keys, t)
	}
	switch {
	case len(match) > 0:
		return match, nil
	case keys == nil:
		return nil, fmt.Errorf("corral has no key set of issuer %s yet (it could not be fetched; see corral's log)", v.cfg.Issuer)
	case t.kid != "":
		return nil, fmt.Errorf("the token's kid %q names no key of the issuer's set", t.kid)
	}
	return nil, fmt.Errorf("no key of the issuer's set allows the token's alg %q", t.alg)
}

// refresh fetches the metadata (the first time, or after a failure) and
// the key set, unless another fetch began since tried: then it waits for
// that one. On failure the keys already held are kept, and it logs why.
func (v *tokenValidator) refresh(ctx context.Context, tried time.Time) {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	v.mu.Lock()
	if !v.tried.Equal(tried) {
		v.mu.Unlock()
		return // fetched while this call waited
	}
	v.tried = v.now()
	v.fetches++
	meta := v.meta
	v.mu.Unlock()
	// The fetch serves every waiting request: it outlives the one whose
	// client went away, within its own timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.cfg.fetchTimeout())
	defer cancel()
	keys, meta, err := v.fetchKeys(ctx, meta)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.meta = meta
	if err != nil {
		v.log.Warn("cannot fetch the authorization server's keys; keeping the keys corral has", "issuer", v.cfg.Issuer, "keys", len(v.keys), "err", err)
		return
	}
	v.keys, v.fetched = keys, v.now()
}

// fetchKeys returns the issuer's key set, and its metadata: meta if not
// nil, else fetched. The metadata returned is nil when the key set could
// not be had, so that the next try discovers it again.
func (v *tokenValidator) fetchKeys(ctx context.Context, meta *asMetadata) ([]*jwk, *asMetadata, error) {
	if meta == nil {
		var err error
		if meta, err = v.fetchMetadata(ctx); err != nil {
			return nil, nil, err
		}
	}
	if meta.JWKSURI == "" {
		return nil, nil, fmt.Errorf("the issuer's metadata has no jwks_uri")
	}
	data, err := v.fetch(ctx, meta.JWKSURI, maxJWKSBytes)
	if err != nil {
		return nil, nil, err
	}
	keys, skipped, err := parseJWKS(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", meta.JWKSURI, err)
	}
	if len(skipped) > 0 {
		v.log.Debug("skipped keys of the issuer's set", "issuer", v.cfg.Issuer, "skipped", skipped)
	}
	return keys, meta, nil
}

// fetchMetadata reads the issuer's metadata from the first of its
// discovery URLs that answers, and checks that it names the issuer
// (RFC 8414, section 3.3).
func (v *tokenValidator) fetchMetadata(ctx context.Context) (*asMetadata, error) {
	var errs []error
	for _, u := range v.cfg.discoveryURLs() {
		data, err := v.fetch(ctx, u, maxASMetadataBytes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var m asMetadata
		if err := json.Unmarshal(data, &m); err != nil {
			errs = append(errs, fmt.Errorf("%s: not JSON metadata: %v", u, err))
			continue
		}
		if m.Issuer != v.cfg.Issuer {
			errs = append(errs, fmt.Errorf("%s: names issuer %q, not %q (oauth.issuer must be the server's issuer exactly)", u, m.Issuer, v.cfg.Issuer))
			continue
		}
		return &m, nil
	}
	return nil, errors.Join(errs...)
}

// secureURL reports whether u is one corral fetches keys and answers
// from: https, or http on a loopback host.
func secureURL(u *url.URL) bool {
	return u.Scheme == "https" || u.Scheme == "http" && isLoopbackListenHost(u.Hostname())
}

// fetch GETs u and returns its body, of at most max bytes, within ctx.
func (v *tokenValidator) fetch(ctx context.Context, u string, max int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if !secureURL(req.URL) {
		return nil, fmt.Errorf("refusing to fetch %s: not https (nor http on loopback)", redactedURL(req.URL))
	}
	req.Header.Set("Accept", "application/json")
	return v.do(req, max)
}

// do sends req and returns the body of a 200 answer, of at most max bytes.
func (v *tokenValidator) do(req *http.Request, max int64) ([]byte, error) {
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	where := redactedURL(req.URL)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", where, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %v", where, err)
	case int64(len(data)) > max:
		return nil, fmt.Errorf("%s: the answer is more than %d bytes", where, max)
	}
	return data, nil
}

// redactedURL returns u without its user information and query, for
// messages.
func redactedURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// introspected returns what the introspection endpoint says of token
// (RFC 7662), from the cache when it answered within cacheTime.
func (v *tokenValidator) introspected(ctx context.Context, token string, sum [32]byte) (*tokenInfo, error) {
	now := v.now()
	if info, err, ok := v.introspect.get(sum, now); ok {
		return info, err
	}
	info, err := v.askIntrospection(ctx, token, now)
	var ae *authError
	if err != nil && !errors.As(err, &ae) {
		// The endpoint could not be asked: nothing is cached, the next
		// request asks again.
		v.log.Warn("cannot introspect a token", "issuer", v.cfg.Issuer, "err", err)
		return nil, invalidToken("the token could not be checked: the authorization server did not answer")
	}
	until := now.Add(firstSet(v.cfg.Introspection.CacheTime, Duration(defaultIntrospectCache)).D())
	if info != nil && !info.exp.IsZero() && info.exp.Before(until) {
		until = info.exp
	}
	v.introspect.put(sum, info, err, until, now)
	return info, err
}

// askIntrospection posts token to the introspection endpoint, as corral's
// client, and checks the answer: active, the issuer's, for corral's
// audience, and not expired. An error that is not an *authError says the
// endpoint could not be asked.
func (v *tokenValidator) askIntrospection(ctx context.Context, token string, now time.Time) (*tokenInfo, error) {
	in := v.cfg.Introspection
	endpoint := in.URL
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.cfg.fetchTimeout())
	defer cancel()
	if endpoint == "" {
		v.mu.Lock()
		meta := v.meta
		v.mu.Unlock()
		if meta == nil {
			var err error
			if meta, err = v.fetchMetadata(ctx); err != nil {
				return nil, err
			}
			v.mu.Lock()
			v.meta = meta
			v.mu.Unlock()
		}
		if endpoint = meta.IntrospectionEndpoint; endpoint == "" {
			return nil, errors.New("the issuer's metadata has no introspection_endpoint; set oauth.introspection.url")
		}
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	if !secureURL(req.URL) {
		return nil, fmt.Errorf("refusing to send a token to %s: not https (nor http on loopback)", redactedURL(req.URL))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749, section 2.3.1: each form-encoded, then Basic.
	req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(in.secret))
	data, err := v.do(req, maxIntrospectionBytes)
	if err != nil {
		return nil, err
	}
	var a struct {
		Active bool `json:"active"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("the introspection answer is not JSON: %v", err)
	}
	if !a.Active {
		return nil, invalidToken("the authorization server says the token is not active")
	}
	c, err := parseClaims(data, v.cfg.groupsClaim())
	if err != nil {
		return nil, invalidToken("%v", err)
	}
	if c.iss == "" {
		c.iss = v.cfg.Issuer // iss is optional in an introspection answer
	}
	if c.exp.IsZero() {
		c.exp = now.Add(time.Hour) // the answer is cached at most cacheTime anyway
	}
	if err := c.check(v.cfg.Issuer, v.cfg.audience(), now, v.cfg.leeway()); err != nil {
		return nil, invalidToken("%v", err)
	}
	return &tokenInfo{sub: c.sub, clientID: c.clientID, scopes: c.scopes, groups: c.groups, exp: c.exp}, nil
}

// fetchCount returns how many fetches of the key set have begun.
func (v *tokenValidator) fetchCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.fetches
}

// A tokenCache remembers what was found of tokens, by their SHA-256, each
// until a time, and at most max of them. Its methods are safe for
// concurrent use.
type tokenCache struct {
	max int

	mu sync.Mutex
	m  map[[32]byte]cachedToken
}

// cachedToken is one answer of a tokenCache.
type cachedToken struct {
	info  *tokenInfo
	err   error
	until time.Time
}

// newTokenCache returns an empty cache of at most max answers.
func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: map[[32]byte]cachedToken{}}
}

// get returns the answer kept for sum, and whether one is, at now.
func (c *tokenCache) get(sum [32]byte, now time.Time) (*tokenInfo, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[sum]
	if !ok || !now.Before(e.until) {
		return nil, nil, false
	}
	return e.info, e.err, true
}

// put keeps an answer for sum until until. When the cache is full it first
// drops the answers past their time, then, if still full, any one.
func (c *tokenCache) put(sum [32]byte, info *tokenInfo, err error, until, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[sum] = cachedToken{info, err, until}
}

// clientFor returns the named client of a valid token's caller: the client
// of the first rule of the map that info matches, else defaultClient. ok
// is false when the map names clients and none is the token's (a 403).
// With neither map nor defaultClient, the caller is no named client ("").
func (o *OAuthConfig) clientFor(info *tokenInfo) (client string, ok bool) {
	for _, r := range o.Map {
		if (r.Sub == "" || r.Sub == info.sub) &&
			(r.ClientID == "" || r.ClientID == info.clientID) &&
			(r.Scope == "" || slices.Contains(info.scopes, r.Scope)) &&
			(r.Group == "" || slices.Contains(info.groups, r.Group)) {
			return r.Client, true
		}
	}
	return o.DefaultClient, o.DefaultClient != "" || len(o.Map) == 0
}

// missingScopes returns the scopes of o's scopes that info does not carry.
func (o *OAuthConfig) missingScopes(info *tokenInfo) []string {
	var missing []string
	for _, s := range o.Scopes {
		if !slices.Contains(info.scopes, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// challenge returns the WWW-Authenticate value of a refusal for e: the
// Bearer scheme with corral's resource_metadata URL (RFC 9728, section
// 5.1), the scopes a token needs, and e's error code and description
// (RFC 6750, section 3), when e has one.
func (o *OAuthConfig) challenge(e *authError) string {
	var b strings.Builder
	fmt.Fprintf(&b, `Bearer resource_metadata="%s"`, challengeValue(o.metadataURL()))
	if len(o.Scopes) > 0 {
		fmt.Fprintf(&b, `, scope="%s"`, challengeValue(strings.Join(o.Scopes, " ")))
	}
	if e != nil && e.code != "" {
		fmt.Fprintf(&b, `, error="%s", error_description="%s"`, e.code, challengeValue(e.msg))
	}
	return b.String()
}

// challengeValue returns s with what a quoted value of RFC 6750's
// challenge may not hold (a quote, a backslash, a control character, or
// a character beyond ASCII) replaced by a space.
func challengeValue(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return ' '
		}
		return r
	}, s)
}

// protectedResourceMetadata returns corral's Protected Resource Metadata
// (RFC 9728, section 2): its resource, the authorization server, the
// scopes, and that a token goes in the Authorization header.
func (o *OAuthConfig) protectedResourceMetadata() []byte {
	doc := struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported,omitempty"`
		BearerMethods        []string `json:"bearer_methods_supported"`
		ResourceName         string   `json:"resource_name"`
	}{o.Resource, []string{o.Issuer}, o.scopesSupported(), []string{"header"}, "corral"}
	data, _ := json.Marshal(doc) // strings only: never fails
	return data
}

// An oauthHolder keeps the validator of the "oauth" config in force, made
// again only when a reload changes that config, so that the keys and
// caches outlive a reload that leaves it alone. Its methods are safe for
// concurrent use.
type oauthHolder struct {
	cur atomic.Pointer[heldValidator]

	mu sync.Mutex // held while a validator is made
}

// heldValidator is a validator with the config it was made for.
type heldValidator struct {
	cfg *OAuthConfig
	v   *tokenValidator
}

// validatorFor returns the validator of o: the one held if it was made for
// o, or for a config equal to o, else a new one (then held).
func (h *oauthHolder) validatorFor(o *OAuthConfig, log *slog.Logger) *tokenValidator {
	if cur := h.cur.Load(); cur != nil && cur.cfg == o {
		return cur.v
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.cur.Load()
	if cur != nil && reflect.DeepEqual(*cur.cfg, *o) {
		h.cur.Store(&heldValidator{o, cur.v})
		return cur.v
	}
	v := newTokenValidator(o, log)
	h.cur.Store(&heldValidator{o, v})
	return v
}
