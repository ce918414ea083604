// One workspace file's identity: inode, size and change time. runner.js records it for every file of
// the pristine workspace; guard.js compares it for each file the Jest host loads into its own realm.
// Only the runner writes the workspace (tests and commands run as a user it is read-only to), and
// any write or rename changes one of the three.
'use strict';

const { statSync } = require('fs'); // taken at load: nothing later can replace what this calls

module.exports = function fileSig(file) {
  const st = statSync(file, { bigint: true });
  return `${st.ino}:${st.size}:${st.ctimeNs}`;
};
