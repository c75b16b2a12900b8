/** The shape of one generated tool spec (src/generated/tools.ts). */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments, canonical names only. */
  readonly parameters: Record<string, unknown>;
  /** Other names sandboxd accepts for a parameter: alias -> canonical. */
  readonly aliases: Readonly<Record<string, string>>;
}
