// A project file's syntax tree with @babel/parser, as mutate.js and testcases.js both read one:
// TypeScript by extension, else JSX, then JSX with Flow; null when none parses.
'use strict';

module.exports = (parse) => function tryParse(text, file) {
  const ts = /\.[cm]?tsx?$/.test(file);
  const plans = ts ? [['typescript']] : [['jsx'], ['jsx', 'flow']];
  for (const plugins of plans) {
    try {
      return parse(text, { sourceType: 'unambiguous', plugins, errorRecovery: false, allowReturnOutsideFunction: true });
    } catch (e) { /* the next plugin set */ }
  }
  return null;
};
