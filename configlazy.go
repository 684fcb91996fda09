package main

// This file holds the settings of lazy start and idle stop: the values of
// "start", and where the catalog cache lives ("cacheDir").

import (
	"errors"
	"os"
	"path/filepath"
)

// The values of a server's "start".
const (
	startEager = "eager"
	startLazy  = "lazy"
)

// validateStart reports a "start" of server s that is neither "eager" nor
// "lazy".
func (p *parser) validateStart(name string, s *ServerConfig) {
	switch s.Start {
	case "", startEager, startLazy:
	default:
		p.errorf(name, "start", `unknown value %q; write "eager" (started with corral, the default) or "lazy" (started by the first request that needs it)`, s.Start)
	}
}

// isLazy reports whether server s is started by the first request that
// needs it rather than with corral.
func (s *ServerConfig) isLazy() bool { return s.Start == startLazy }

// catalogCacheDir returns the directory of the catalog cache: cacheDir,
// relative to the config file's directory, or "corral" in the user's cache
// directory. The error says why there is none.
func (c *Config) catalogCacheDir() (string, error) {
	dir := c.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", errors.New(`no cache directory (` + err.Error() + `); set "cacheDir" at the top level of the config`)
		}
		return filepath.Join(base, "corral"), nil
	}
	if !filepath.IsAbs(dir) && c.file != "" {
		dir = filepath.Join(filepath.Dir(c.file), dir)
	}
	return dir, nil
}
