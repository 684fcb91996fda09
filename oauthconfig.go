package main

// This file holds the settings of corral as an OAuth 2.1 resource server
// (oauth.go): the top-level "oauth" object, which names the authorization
// server whose tokens corral accepts, corral's own resource URI, the scopes
// every token must carry, and the map from a token's claims to the named
// clients of clients.go; their validation, and what -check prints of them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// OAuthConfig makes corral an OAuth 2.1 resource server, as the MCP
// authorization specification asks: it publishes its Protected Resource
// Metadata (RFC 9728) and accepts the access tokens Issuer issued for
// Resource, beside any static bearer token. Its zero value (no "oauth"
// object) accepts none.
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier, compared
	// exactly with a token's iss. Required.
	Issuer string `json:"issuer"`
	// Resource is corral's resource URI: what clients send as resource
	// (RFC 8707), and what a token's aud must hold. Required; an https URL
	// (http on a loopback host), e.g. https://corral.example.com/mcp.
	Resource string `json:"resource"`
	// Audience, if set, is what a token's aud must hold instead of
	// Resource, for an authorization server that writes its own name for
	// an API (Entra ID writes the application ID). If empty, Resource.
	Audience string `json:"audience,omitempty"`
	// MetadataURL is where the authorization server's metadata is read, to
	// find its key set and introspection endpoint. If empty, RFC 8414's
	// /.well-known/oauth-authorization-server of Issuer, then OpenID
	// Connect discovery's /.well-known/openid-configuration.
	MetadataURL string `json:"metadataUrl,omitempty"`
	// Scopes are the scopes every token must carry, all of them; a token
	// short of one gets 403 insufficient_scope. If empty, none.
	Scopes []string `json:"scopes,omitempty"`
	// Leeway is how far a token's exp and nbf may be off the clock. If
	// zero, 30s; at most 5m.
	Leeway Duration `json:"leeway,omitempty"`
	// JWKSRefreshInterval is the least time between two fetches of the key
	// set when a token names a key corral does not have. If zero, 10s.
	JWKSRefreshInterval Duration `json:"jwksRefreshInterval,omitempty"`
	// JWKSMaxAge is how long a key set is used before it is fetched again
	// (and kept if that fails). If zero, 1h.
	JWKSMaxAge Duration `json:"jwksMaxAge,omitempty"`
	// FetchTimeout bounds each fetch of the metadata, the key set, or an
	// introspection. If zero, 5s.
	FetchTimeout Duration `json:"fetchTimeout,omitempty"`
	// Introspection, if set, checks tokens that are not JWTs (opaque
	// tokens) at the authorization server (RFC 7662). If nil, an opaque
	// token is refused.
	Introspection *IntrospectionConfig `json:"introspection,omitempty"`
	// Map says which named client (clients.go) a token's caller is: the
	// first rule that matches the token's claims names it. If empty, or
	// no rule matches, DefaultClient.
	Map []OAuthRule `json:"map,omitempty"`
	// DefaultClient is the client of a token no rule of Map matches. If
	// empty and Map is not, such a token gets 403; if both are empty, a
	// token's caller is no named client and sees every server.
	DefaultClient string `json:"defaultClient,omitempty"`
	// GroupsClaim names the claim that holds a token's groups (a string or
	// an array of strings), which a rule's group matches. If empty,
	// "groups".
	GroupsClaim string `json:"groupsClaim,omitempty"`
	// TLSTerminated says a proxy in front of corral terminates TLS, so
	// that clients reach it over https although corral listens on plain
	// HTTP. Without it, OAuth is refused on a listener beyond loopback: a
	// bearer token over plain HTTP is anyone's who can read the network.
	TLSTerminated bool `json:"tlsTerminated,omitempty"`
}

// IntrospectionConfig is how corral asks the authorization server about an
// opaque token (RFC 7662).
type IntrospectionConfig struct {
	// URL is the introspection endpoint. If empty, the metadata's
	// introspection_endpoint.
	URL string `json:"url,omitempty"`
	// ClientID and the secret in ClientSecretFile (relative to the config
	// file's directory) or ClientSecretEnv are corral's own credentials at
	// the endpoint, sent as HTTP Basic authentication. Required.
	ClientID         string `json:"clientId"`
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	ClientSecretEnv  string `json:"clientSecretEnv,omitempty"`
	// CacheTime is how long an answer is kept (never past the token's
	// exp). If zero, 1m.
	CacheTime Duration `json:"cacheTime,omitempty"`
	// MaxCached bounds the answers kept. If zero, 10000.
	MaxCached int `json:"maxCached,omitempty"`

	// secret is the client secret, read at load.
	secret string
}

// OAuthRule maps the tokens whose claims match it to a named client. Each
// field set must match; at least one must be set.
type OAuthRule struct {
	// Sub matches the token's sub claim; ClientID its client_id (or azp,
	// or Entra ID's appid).
	Sub      string `json:"sub,omitempty"`
	ClientID string `json:"clientId,omitempty"`
	// Scope matches when the token's scopes (scope, or scp) hold it; Group
	// when its groups claim (GroupsClaim) holds it.
	Scope string `json:"scope,omitempty"`
	Group string `json:"group,omitempty"`
	// Client names the client, a key of "clients". Required.
	Client string `json:"client"`
}

// The defaults and bounds of OAuthConfig.
const (
	defaultOAuthLeeway       = 30 * time.Second
	maxOAuthLeeway           = 5 * time.Minute
	defaultJWKSRefresh       = 10 * time.Second
	defaultJWKSMaxAge        = time.Hour
	defaultOAuthFetchTimeout = 5 * time.Second
	defaultIntrospectCache   = time.Minute
	defaultIntrospectMax     = 10000
	defaultGroupsClaim       = "groups"
)

// leeway returns o's leeway, its default filled in.
func (o *OAuthConfig) leeway() time.Duration {
	return firstSet(o.Leeway, Duration(defaultOAuthLeeway)).D()
}

// jwksRefresh returns o's JWKSRefreshInterval, its default filled in.
func (o *OAuthConfig) jwksRefresh() time.Duration {
	return firstSet(o.JWKSRefreshInterval, Duration(defaultJWKSRefresh)).D()
}

// jwksMaxAge returns o's JWKSMaxAge, its default filled in.
func (o *OAuthConfig) jwksMaxAge() time.Duration {
	return firstSet(o.JWKSMaxAge, Duration(defaultJWKSMaxAge)).D()
}

// fetchTimeout returns o's FetchTimeout, its default filled in.
func (o *OAuthConfig) fetchTimeout() time.Duration {
	return firstSet(o.FetchTimeout, Duration(defaultOAuthFetchTimeout)).D()
}

// groupsClaim returns o's GroupsClaim, its default filled in.
func (o *OAuthConfig) groupsClaim() string { return firstSet(o.GroupsClaim, defaultGroupsClaim) }

// audience returns what a token's aud must hold.
func (o *OAuthConfig) audience() string { return firstSet(o.Audience, o.Resource) }

// discoveryURLs returns where the authorization server's metadata is
// looked for, in order: MetadataURL if set, else RFC 8414's well-known URL
// (the well-known part inserted before the issuer's path, section 3.1),
// then OpenID Connect discovery's, inserted (RFC 8414, section 5) and
// appended to the issuer: the order MCP clients try them.
func (o *OAuthConfig) discoveryURLs() []string {
	if o.MetadataURL != "" {
		return []string{o.MetadataURL}
	}
	u, err := url.Parse(o.Issuer)
	if err != nil {
		return nil
	}
	path := strings.TrimSuffix(u.Path, "/")
	at := func(p string) string {
		c := *u
		c.Path = p
		return c.String()
	}
	if path == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}
	}
	// The order the MCP specification (2025-11-25) gives clients.
	return []string{at("/.well-known/oauth-authorization-server" + path), at("/.well-known/openid-configuration" + path), at(path + "/.well-known/openid-configuration")}
}

// metadataURL returns the URL of corral's Protected Resource Metadata for
// o's resource: the well-known part inserted between the host and the
// resource's path (RFC 9728, section 3.1).
func (o *OAuthConfig) metadataURL() string {
	u, err := url.Parse(o.Resource)
	if err != nil {
		return ""
	}
	u.Path, u.RawQuery, u.Fragment = protectedResourcePath+o.resourcePath(), "", ""
	return u.String()
}

// resourcePath returns the path of o's resource, without a final slash.
func (o *OAuthConfig) resourcePath() string {
	u, err := url.Parse(o.Resource)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Path, "/")
}

// protectedResourcePath is where RFC 9728 puts a resource's metadata.
const protectedResourcePath = "/.well-known/oauth-protected-resource"

// scopesSupported returns the scopes corral's metadata names: those every
// token must carry, then those the map's rules match, each once.
func (o *OAuthConfig) scopesSupported() []string {
	out := slices.Clone(o.Scopes)
	for _, r := range o.Map {
		if r.Scope != "" && !slices.Contains(out, r.Scope) {
			out = append(out, r.Scope)
		}
	}
	return out
}

// validateOAuth checks c's "oauth" object: issuer and resource are
// absolute URLs (https, or http on a loopback host), durations and bounds
// are in range, each rule names a client of "clients", and OAuth over
// plain HTTP beyond loopback is refused unless tlsTerminated says a proxy
// terminates TLS. It reads the introspection secret. Every error names the
// field and the fix.
func (p *parser) validateOAuth(c *Config, raw json.RawMessage) {
	o := c.OAuth
	if o == nil {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(new(OAuthConfig)); err != nil && strings.Contains(err.Error(), "unknown field") {
		p.errorf("", "oauth", "%s; the fields are issuer, resource, audience, metadataUrl, scopes, leeway, jwksRefreshInterval, jwksMaxAge, fetchTimeout, introspection, map, defaultClient, groupsClaim and tlsTerminated (a map rule's: sub, clientId, scope, group, client; introspection's: url, clientId, clientSecretFile, clientSecretEnv, cacheTime, maxCached)", strings.TrimPrefix(err.Error(), "json: "))
	}
	p.checkOAuthURL("oauth.issuer", o.Issuer, true, "the authorization server's issuer, exactly as its tokens' iss writes it, e.g. \"https://login.example.com/realms/corral\"")
	p.checkOAuthURL("oauth.resource", o.Resource, true, "corral's own URL as clients reach it, e.g. \"https://corral.example.com/mcp\"")
	p.checkOAuthURL("oauth.metadataUrl", o.MetadataURL, false, "the URL of the authorization server's metadata, or remove the key to find it from issuer")
	if u, err := url.Parse(o.Resource); err == nil && u.Fragment != "" {
		p.errorf("", "oauth.resource", "%q has a fragment, which a resource URI must not have (RFC 8707); remove it", o.Resource)
	}
	for _, d := range []struct {
		key string
		d   Duration
		max time.Duration
	}{{"oauth.leeway", o.Leeway, maxOAuthLeeway}, {"oauth.jwksRefreshInterval", o.JWKSRefreshInterval, 0}, {"oauth.jwksMaxAge", o.JWKSMaxAge, 0}, {"oauth.fetchTimeout", o.FetchTimeout, 0}} {
		switch {
		case d.d < 0:
			p.errorf("", d.key, "must not be negative, got %v; use a duration such as \"30s\", or remove the key for the default", d.d.D())
		case d.max > 0 && d.d.D() > d.max:
			p.errorf("", d.key, "is %v, more than %v: a clock that far off is a broken clock; fix the clock, or use at most %v", d.d.D(), d.max, d.max)
		}
	}
	for i, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			p.errorf("", fmt.Sprintf("oauth.scopes[%d]", i), "%q is not a scope: a scope is non-empty, with no space, quote or backslash (RFC 6749, section 3.3)", s)
		}
	}
	for i, r := range o.Map {
		field := fmt.Sprintf("oauth.map[%d]", i)
		if r.Sub == "" && r.ClientID == "" && r.Scope == "" && r.Group == "" {
			p.errorf("", field, "matches every token; give it sub, clientId, scope or group (or use oauth.defaultClient for every token)")
		}
		p.checkOAuthClient(c, field+".client", r.Client, true)
	}
	p.checkOAuthClient(c, "oauth.defaultClient", o.DefaultClient, false)
	if in := o.Introspection; in != nil {
		p.checkOAuthURL("oauth.introspection.url", in.URL, false, "the authorization server's introspection endpoint, or remove the key to read it from the metadata")
		if in.ClientID == "" {
			p.errorf("", "oauth.introspection.clientId", "is missing: corral authenticates to the introspection endpoint as a client; register one and write its client ID")
		}
		in.secret = p.readOAuthSecret(in)
		if in.CacheTime < 0 {
			p.errorf("", "oauth.introspection.cacheTime", "must not be negative, got %v; use a duration such as \"1m\", or remove the key for the default", in.CacheTime.D())
		}
		if in.MaxCached < 0 {
			p.errorf("", "oauth.introspection.maxCached", "must not be negative, got %d; use a number of answers, or remove the key for the default (%d)", in.MaxCached, defaultIntrospectMax)
		}
	}
	if !o.TLSTerminated {
		if host, _, err := net.SplitHostPort(firstSet(c.Listen, defaultListen)); err == nil && !isLoopbackListenHost(host) {
			p.errorf("", "oauth.tlsTerminated", "listen %q is beyond loopback and corral speaks plain HTTP, so bearer tokens would cross the network readable; put a TLS-terminating proxy in front of corral and set \"tlsTerminated\": true, or listen on 127.0.0.1", c.Listen)
		}
	}
}

// checkOAuthURL records an error unless v is an absolute http(s) URL
// (https, or http on a loopback host), or empty where not required.
func (p *parser) checkOAuthURL(field, v string, required bool, what string) {
	if v == "" {
		if required {
			p.errorf("", field, "is missing; write %s", what)
		}
		return
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http":
		p.errorf("", field, "%q is not an absolute http or https URL; write %s", v, what)
	case u.Scheme == "http" && !isLoopbackListenHost(u.Hostname()):
		p.errorf("", field, "%q is plain http beyond loopback, which OAuth forbids (tokens and keys would be readable and changeable on the way); use https", v)
	case u.User != nil:
		p.errorf("", field, "%q holds a user name or password; remove it", v)
	}
}

// isLoopbackListenHost reports whether host, a listen address's or a URL's
// host, is a loopback name or address. An empty host (every address) is
// not.
func isLoopbackListenHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkOAuthClient records an error unless name, when set (or required),
// names a client of c.
func (p *parser) checkOAuthClient(c *Config, field, name string, required bool) {
	switch {
	case name == "" && required:
		p.errorf("", field, "is missing; name the client (a key of \"clients\") whose profile the rule's tokens get")
	case name != "" && c.Clients[name] == nil:
		p.errorf("", field, "no client is named %q in \"clients\"; add it (a client for OAuth callers needs no token: {\"profile\": \"...\"}), or name one of %q", name, sortedKeys(c.Clients))
	}
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readOAuthSecret reads the introspection client secret from
// clientSecretFile (relative to the config file's directory) or
// clientSecretEnv; "" after recording the error if it cannot.
func (p *parser) readOAuthSecret(in *IntrospectionConfig) string {
	const prefix = "oauth.introspection."
	switch {
	case in.ClientSecretFile != "" && in.ClientSecretEnv != "":
		p.errorf("", prefix+"clientSecretFile", "set clientSecretFile or clientSecretEnv, not both")
	case in.ClientSecretFile != "":
		data, err := readSecretFile(filepath.Dir(p.path), in.ClientSecretFile)
		if err != nil {
			p.errorf("", prefix+"clientSecretFile", "cannot read the secret: %v", err)
			return ""
		}
		if s := strings.TrimSpace(data); s != "" {
			return s
		}
		p.errorf("", prefix+"clientSecretFile", "%s is empty; put corral's client secret in it", in.ClientSecretFile)
	case in.ClientSecretEnv != "":
		if s, ok := p.getenv(in.ClientSecretEnv); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
		p.errorf("", prefix+"clientSecretEnv", "the environment variable %s is not set or empty; export corral's client secret in it", in.ClientSecretEnv)
	default:
		p.errorf("", prefix+"clientSecretFile", "corral has no client secret for the introspection endpoint; set clientSecretFile (a file holding it) or clientSecretEnv (a variable holding it)")
	}
	return ""
}

// oauthClientNames returns the clients o's map and defaultClient name,
// which need no token of their own.
func (o *OAuthConfig) oauthClientNames() []string {
	if o == nil {
		return nil
	}
	var names []string
	for _, r := range o.Map {
		names = append(names, r.Client)
	}
	if o.DefaultClient != "" {
		names = append(names, o.DefaultClient)
	}
	return names
}

// oauthReport returns what -check prints of c's "oauth" object, or nothing
// if it has none: the issuer and where its metadata is looked for, the
// resource and audience, the scopes, and the map from claims to clients.
func (c *Config) oauthReport() []byte {
	o := c.OAuth
	if o == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "oauth: tokens of issuer %s (metadata from %s)\n", o.Issuer, strings.Join(o.discoveryURLs(), ", then "))
	fmt.Fprintf(&b, "oauth: resource %s, published at %s; a token's aud must hold %s\n", o.Resource, o.metadataURL(), o.audience())
	if len(o.Scopes) > 0 {
		fmt.Fprintf(&b, "oauth: every token must carry scope %s\n", strings.Join(o.Scopes, " "))
	}
	fmt.Fprintf(&b, "oauth: leeway %v; the key set is fetched again after %v, or on an unknown key at most every %v\n", o.leeway(), o.jwksMaxAge(), o.jwksRefresh())
	if in := o.Introspection; in != nil {
		where := in.URL
		if where == "" {
			where = "the metadata's introspection_endpoint"
		}
		fmt.Fprintf(&b, "oauth: opaque tokens introspected at %s as client %q\n", where, in.ClientID)
	}
	for _, r := range o.Map {
		var when []string
		for _, m := range []struct{ claim, v string }{{"sub", r.Sub}, {"client_id", r.ClientID}, {"scope", r.Scope}, {o.groupsClaim(), r.Group}} {
			if m.v != "" {
				when = append(when, fmt.Sprintf("%s %q", m.claim, m.v))
			}
		}
		fmt.Fprintf(&b, "oauth: a token with %s is client %s\n", strings.Join(when, " and "), quoteName(r.Client))
	}
	switch {
	case o.DefaultClient != "":
		fmt.Fprintf(&b, "oauth: any other token is client %s\n", quoteName(o.DefaultClient))
	case len(o.Map) > 0:
		fmt.Fprintf(&b, "oauth: any other token gets 403\n")
	default:
		fmt.Fprintf(&b, "oauth: a token's caller is no named client, and sees every server\n")
	}
	if o.TLSTerminated {
		fmt.Fprintf(&b, "oauth: TLS is terminated in front of corral (tlsTerminated)\n")
	}
	return []byte(b.String())
}
