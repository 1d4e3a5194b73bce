from chain.cli import main

main()
