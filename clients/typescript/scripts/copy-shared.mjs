// Copies what the package publishes from the repository into it: the contract
// (proto/) and the licence (LICENSE, NOTICE), so there is still one source of
// each (never edit the copies; they are not committed).
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = join(pkg, '..', '..');
const copies = [join('proto', 'sandboxd', 'v1', 'sandbox.proto'), 'LICENSE', 'NOTICE'];
for (const rel of copies) {
  const to = join(pkg, rel);
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(join(repo, rel), to);
}
