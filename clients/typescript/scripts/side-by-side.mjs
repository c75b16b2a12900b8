// Markdown table of one scripted Flue session in both modes, from the JSON
// lines test/flue.test.ts writes when SANDBOXD_TS_TABLE=<file> is set.
import { readFileSync } from 'node:fs';

const rows = readFileSync(process.argv[2], 'utf8').trim().split('\n').map((line) => JSON.parse(line));
const cell = (r) => {
  const text = r.text.length > 160 ? `${r.text.slice(0, 157)}...` : r.text;
  const shown = text.replaceAll('|', '\\|').replaceAll('\t', '→').replaceAll('\n', '<br>');
  return `${r.isError ? '**error:** ' : ''}<code>${shown}</code>`;
};
const tools = rows.filter((r) => r.mode === 'tools');
const driver = rows.filter((r) => r.mode === 'driver');
console.log('| the model calls | driver mode (Flue\'s tools on sandboxd verbs) | tools mode (sandboxd\'s tools) |');
console.log('|---|---|---|');
tools.forEach((t, i) => {
  const d = driver[i];
  console.log(`| \`${t.name} ${JSON.stringify(t.args).replaceAll('|', '\\|')}\` | ${d ? cell(d) : ''} | ${cell(t)} |`);
});
