"""A mutation fuzzer for every parser and decoder of untrusted bytes (``make fuzz``; docs/development.md, "Fuzzing")."""
