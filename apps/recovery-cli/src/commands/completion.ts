import type { Command } from "commander";
import type { Rendered } from "../render.js";

export const COMPLETION_SHELLS = ["bash", "zsh", "fish"] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

/** One command of the table as completion sees it: where it sits, what may follow it. */
interface CompletionNode {
  /** Words from the program to this command (`["creates", "adopt"]`); empty for the program itself. */
  path: string[];
  description: string;
  subcommands: string[];
  /** Its own long options (the program's are global: valid after any command). */
  options: CompletionOption[];
  /** The values its argument takes, when commander lists them (`completion <shell>`). */
  choices: string[];
}

interface CompletionOption {
  flag: string;
  takesValue: boolean;
  description: string;
}

/** Commander's command tree, walked: no hand-kept list, so a command added to the table completes too. */
export function completionTree(program: Command): CompletionNode[] {
  const nodes: CompletionNode[] = [];
  const visit = (command: Command, path: string[]): void => {
    nodes.push({
      path,
      description: command.description(),
      subcommands: command.commands.map((sub) => sub.name()),
      options: command.options
        .filter((option) => option.long !== undefined && !option.hidden)
        .map((option) => ({
          flag: option.long!,
          takesValue: option.required || option.optional,
          description: option.description,
        })),
      choices: command.registeredArguments.flatMap((argument) => argument.argChoices ?? []),
    });
    for (const sub of command.commands) visit(sub, [...path, sub.name()]);
  };
  visit(program, []);
  return nodes;
}

/** `drydock completion <shell>`: the script, on stdout (the --json form carries it as `script`). */
export function completion(program: Command, shell: CompletionShell): Rendered {
  const nodes = completionTree(program);
  const script =
    shell === "bash" ? bashScript(nodes) : shell === "zsh" ? zshScript(nodes) : fishScript(nodes);
  return { data: { shell, script }, human: script };
}

const GLOBAL_FLAGS = ["--help", "--version"];

/** Every flag that takes a value, program's and commands' alike (the walk skips the value after it). */
function valueFlags(nodes: readonly CompletionNode[]): string[] {
  return [...new Set(nodes.flatMap((node) => node.options.filter((o) => o.takesValue).map((o) => o.flag)))];
}

/** The shell body shared by bash and zsh: find the command path typed so far, then the words after it. */
function pathWalk(nodes: readonly CompletionNode[], wordAt: (i: string) => string, first: number): string {
  const paths = nodes.filter((node) => node.path.length > 0).map((node) => `"${node.path.join(" ")}"`);
  const root = nodes[0]!;
  const cases = nodes.map((node) => {
    const flags = [...node.options, ...(node.path.length === 0 ? [] : root.options)].map((o) => o.flag);
    const words = [...node.subcommands, ...node.choices];
    return `    "${node.path.join(" ")}") commands="${words.join(" ")}"; flags="${[...new Set([...flags, ...GLOBAL_FLAGS])].join(" ")}" ;;`;
  });
  return [
    `  local cmdpath="" word i skip=0 commands="" flags=""`,
    `  for ((i = ${first}; i < cword; i++)); do`,
    `    word="${wordAt("i")}"`,
    `    if ((skip)); then skip=0; continue; fi`,
    '    case "$word" in',
    `      ${valueFlags(nodes).join("|")}) skip=1; continue ;;`,
    "      -*) continue ;;",
    "    esac",
    `    case "\${cmdpath:+$cmdpath }$word" in`,
    `      ${paths.join("|")}) cmdpath="\${cmdpath:+$cmdpath }$word" ;;`,
    "    esac",
    "  done",
    '  case "$cmdpath" in',
    ...cases,
    "  esac",
  ].join("\n");
}

function bashScript(nodes: readonly CompletionNode[]): string {
  return `# bash completion for drydock (generated from its command table by \`drydock completion bash\`)
# Install: drydock completion bash > /etc/bash_completion.d/drydock   (or: source <(drydock completion bash))
_drydock() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cword="$COMP_CWORD"
${pathWalk(nodes, (i) => `\${COMP_WORDS[${i}]}`, 1)}
  if ((skip)); then
    # The value of an option: a directory for --data-dir, nothing to guess otherwise.
    if [[ "\${COMP_WORDS[cword - 1]}" == "--data-dir" ]]; then COMPREPLY=($(compgen -d -- "$cur")); else COMPREPLY=(); fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
  fi
  return 0
}
complete -F _drydock drydock
`;
}

function zshScript(nodes: readonly CompletionNode[]): string {
  // zsh's $words starts at 1 with the command itself; $path and $words are special there, hence cmdpath.
  return `#compdef drydock
# zsh completion for drydock (generated from its command table by \`drydock completion zsh\`)
# Install: drydock completion zsh > "\${fpath[1]}/_drydock"   (or: eval "$(drydock completion zsh)" after compinit)
_drydock() {
  local cur="\${words[CURRENT]}" cword="$CURRENT"
${pathWalk(nodes, (i) => `\${words[${i}]}`, 2)}
  if ((skip)); then
    if [[ "\${words[cword - 1]}" == "--data-dir" ]]; then _files -/; fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    compadd -- \${=flags}
  else
    compadd -- \${=commands}
  fi
}
compdef _drydock drydock
`;
}

function fishQuote(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

function fishScript(nodes: readonly CompletionNode[]): string {
  const lines = [
    "# fish completion for drydock (generated from its command table by `drydock completion fish`)",
    "# Install: drydock completion fish > ~/.config/fish/completions/drydock.fish",
    "complete -c drydock -f",
  ];
  const condition = (node: CompletionNode): string => {
    if (node.path.length === 0) return "__fish_use_subcommand";
    const seen = node.path.map((word) => `__fish_seen_subcommand_from ${word}`).join("; and ");
    return node.subcommands.length === 0
      ? seen
      : `${seen}; and not __fish_seen_subcommand_from ${node.subcommands.join(" ")}`;
  };
  for (const node of nodes) {
    const byName = new Map(
      node.subcommands.map((name) => [
        name,
        nodes.find((n) => n.path.join(" ") === [...node.path, name].join(" ")),
      ]),
    );
    for (const [name, sub] of byName) {
      lines.push(
        `complete -c drydock -n ${fishQuote(condition(node))} -a ${name} -d ${fishQuote(sub?.description ?? "")}`,
      );
    }
    for (const choice of node.choices)
      lines.push(`complete -c drydock -n ${fishQuote(condition(node))} -a ${choice}`);
    for (const option of node.options) {
      const where = node.path.length === 0 ? "" : ` -n ${fishQuote(condition(node))}`;
      lines.push(
        `complete -c drydock${where} -l ${option.flag.slice(2)}${option.takesValue ? " -r" : ""} -d ${fishQuote(option.description)}`,
      );
    }
  }
  return `${lines.join("\n")}\n`;
}
