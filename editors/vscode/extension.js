// Starts `polc lsp` (the Pol language server) for every .pol document.
// The server is polc itself: diagnostics are exactly `polc check -v`'s.
"use strict";
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("polc").get("path") || "polc";
  const serverOptions = { command, args: ["lsp"], transport: TransportKind.stdio };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "pol" },
      { scheme: "untitled", language: "pol" },
    ],
  };
  client = new LanguageClient("polc", "Pol language server (polc lsp)", serverOptions, clientOptions);
  client.start().catch((err) => {
    vscode.window.showErrorMessage(
      `polc lsp did not start (${err.message}). Set "polc.path" to your polc executable.`);
  });
  context.subscriptions.push({ dispose: () => (client ? client.stop() : undefined) });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
