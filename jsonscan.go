package main

// This file holds the package's scanning of raw JSON: finding the members of
// an object, and the end of a value, without decoding them, so that a large
// result is passed on as the bytes it arrived in.

// members calls f with the name and raw value of each member of the JSON
// object in data, which must be valid JSON; it does nothing if data is not
// an object. Member names with escapes are passed as written.
func members(data []byte, f func(key string, value []byte)) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return // '}' or the end
		}
		end := skipString(data, i)
		key := string(data[i+1 : end-1])
		i = skipSpace(data, end)
		i = skipSpace(data, i+1) // past ':'
		start := i
		i = skipValue(data, i)
		f(key, data[start:i])
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at data[i].
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the value starting at data[i].
func skipValue(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			i = skipString(data, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}
