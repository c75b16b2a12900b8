// Copies the contract from the repository's proto/ into the package, so the
// published package carries it and there is still one source (never edit the copy).
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const rel = join('sandboxd', 'v1', 'sandbox.proto');
const from = join(here, '..', '..', '..', 'proto', rel);
const to = join(here, '..', 'proto', rel);
mkdirSync(dirname(to), { recursive: true });
copyFileSync(from, to);
