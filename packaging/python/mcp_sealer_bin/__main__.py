from mcp_sealer_bin import main

main()
