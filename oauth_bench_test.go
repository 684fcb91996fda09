package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkTokenCheck measures what checking a request's bearer token costs
// corral (httpFrontEnd.identify), in one run: a static token (the
// baseline), an OAuth JWT whose check is remembered (cache warm: every
// request of a session after its first), a JWT checked afresh with the key
// set held (its signature verified, for each algorithm), and a JWT checked
// by a validator that has nothing yet (cache cold: the issuer's metadata
// and key set fetched over loopback, then the signature).
//
//	go test -run '^$' -bench BenchmarkTokenCheck -benchtime 2000x -count 5 .
func BenchmarkTokenCheck(b *testing.B) {
	k := testKeys()
	iss := newTestIssuer(b, rsaJWK(k.rsa, "r1", ""), ecJWK(k.ec, "e1"), edJWK(k.ed, "d1"))
	tr := &testRemote{headers: map[string][]http.Header{}}
	ts := httptest.NewServer(tr)
	b.Cleanup(ts.Close)
	tg := startGateway(b, `{
		"authTokenFile": `+tokenFile(b, rootToken)+`,
		"oauth": {"issuer": "`+iss.url+`", "resource": "`+testResource+`"},
		"mcpServers": {"r": {"url": "`+ts.URL+`/mcp"}}
	}`)
	h := tg.h
	cfg := h.gw.config()
	request := func(token string) *http.Request {
		r, _ := http.NewRequest("POST", tg.url, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return r
	}
	check := func(b *testing.B, r *http.Request) {
		if _, refused := h.identify(r); refused != nil {
			b.Fatal(refused)
		}
	}
	b.Run("static token", func(b *testing.B) {
		r := request(rootToken)
		for b.Loop() {
			check(b, r)
		}
	})
	jwt := rsaToken(b, iss, nil)
	b.Run("OAuth RS256, cache warm", func(b *testing.B) {
		r := request(jwt)
		check(b, r)
		for b.Loop() {
			check(b, r)
		}
	})
	for _, tc := range []struct {
		alg, kid string
		key      any
	}{{algRS256, "r1", k.rsa}, {algES256, "e1", k.ec}, {algEdDSA, "d1", k.ed}} {
		b.Run("OAuth "+tc.alg+", keys held, token new", func(b *testing.B) {
			r := request(signJWT(b, map[string]any{"alg": tc.alg, "kid": tc.kid}, claimsFor(iss, nil), tc.key))
			v := h.oauth.validatorFor(cfg.OAuth, h.log)
			check(b, r)
			for b.Loop() {
				v.verified = newTokenCache(maxVerifiedTokens) // forget the token, keep the keys
				check(b, r)
			}
		})
	}
	b.Run("OAuth RS256, cache cold", func(b *testing.B) {
		r := request(jwt)
		for b.Loop() {
			h.oauth.cur.Store(nil) // a new validator: metadata and key set fetched again
			check(b, r)
		}
	})
}
