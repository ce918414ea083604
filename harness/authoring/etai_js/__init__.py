"""etai-js: a versioned manifest of real bug-fix sessions (suites/etai-js/) that holds no third-party
source, the converter that writes its rows from mined suites, and `etai suite fetch`, which
materialises it into suite folders from the projects' own repositories (docs/guides/etai-js.md)."""
