//! Nothing: this package holds only tests (`tests/`).
