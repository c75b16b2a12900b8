// One Flue agent whose workspace is a sandboxd sandbox.
//   sandboxd serve            (unix socket /run/sandboxd/sandboxd.sock)
//   npm install && ANTHROPIC_API_KEY=... npm start
import { init, useModel, useSandbox } from '@flue/runtime';
import { start } from '@flue/runtime/node';
import { deleteSandbox, sandboxdFactory } from '@sandboxd/client/flue';

const target = process.env.SANDBOXD_TARGET ?? 'unix:///run/sandboxd/sandboxd.sock';

export function Coder() {
  useModel(process.env.FLUE_MODEL ?? 'anthropic/claude-sonnet-4-5');
  // mode: 'tools' (default) gives the model sandboxd's six tools;
  // mode: 'driver' runs Flue's own tools on sandboxd's file and exec verbs.
  useSandbox(sandboxdFactory({ target, mode: 'tools', sandbox: { memoryBytes: 1 << 30 } }));
  return 'You write and run small programs in your workspace.';
}

const flue = await start({ agents: [Coder] });
try {
  const agent = init(Coder, { id: 'demo-1' }); // same id, same workspace, across runs
  const receipt = await agent.dispatch('Write fizzbuzz.py for 1..15, run it, show the output.');
  console.log((await agent.read(receipt)).text);
} finally {
  await flue.stop();
  if (process.env.KEEP !== '1') await deleteSandbox('demo-1', { target }); // Flue never deletes sandboxes
}
