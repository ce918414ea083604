'use strict';

// Held out: never in the sandbox while the agent acts (sessions.jsonl `held_out_tests`).
const { slugify } = require('../src/slugify');

test('joins the words of a sentence with single dashes', () => {
  expect(slugify('The Quick  Brown Fox')).toBe('the-quick-brown-fox');
});

test('drops accents and punctuation', () => {
  expect(slugify('Crème Brûlée, S’il Vous Plaît?')).toBe('creme-brulee-s-il-vous-plait');
});

test('keeps digits and trims dashes at the ends', () => {
  expect(slugify('--Version 2.0 Release--')).toBe('version-2-0-release');
});
