// Accessibility check of the page as it stands, with axe-core (npm, tests/e2e/package.json). The
// library is evaluated through the DevTools protocol (page.evaluate), which the pages' CSP
// (script-src 'self') does not apply to, so nothing about the pages is loosened for the test.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

// The violations of impact serious or critical ([{id, impact, help, nodes: [selector...]}]).
export async function seriousViolations(page) {
  // The layout marks wide tables (a scroll hint, keyboard focus) 100 ms after the page changes.
  await page.waitForTimeout(250);
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE);
  const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' ')) }));
}

// Fails the test with the violations (id, impact, help, the first nodes) when there are any.
export async function noSeriousViolations(page, what) {
  const v = await seriousViolations(page);
  assert.deepEqual(v, [], `${what}: ${JSON.stringify(v, null, 1)}`);
}
