export * from './client.js';
export * from './errors.js';
export type { ForwardOptions, PortForward } from './ports.js';
export { INSTANCE_ID, instanceIdFor, sandboxCallId } from './ids.js';
export type { ToolSpec } from './toolspec.js';
export { TOOL_SPECS } from './generated/tools.js';
export * from './generated/network.js';
